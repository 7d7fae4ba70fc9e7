//===- KVQDialect.h - kvq dialect -------------------------------*- C++ -*-===//

#ifndef KVQ_DIALECT_KVQ_KVQDIALECT_H
#define KVQ_DIALECT_KVQ_KVQDIALECT_H

#include "mlir/IR/Dialect.h"

#include "kvq/Dialect/KVQ/KVQOpsDialect.h.inc"

#endif // KVQ_DIALECT_KVQ_KVQDIALECT_H
