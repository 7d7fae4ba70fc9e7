//===- KVQAttrs.h - kvq scheme attributes -----------------------*- C++ -*-===//

#ifndef KVQ_DIALECT_KVQ_KVQATTRS_H
#define KVQ_DIALECT_KVQ_KVQATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "kvq/Dialect/KVQ/KVQEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kvq/Dialect/KVQ/KVQAttrs.h.inc"

#endif // KVQ_DIALECT_KVQ_KVQATTRS_H
