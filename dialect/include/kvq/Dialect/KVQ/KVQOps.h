//===- KVQOps.h - kvq ops ---------------------------------------*- C++ -*-===//

#ifndef KVQ_DIALECT_KVQ_KVQOPS_H
#define KVQ_DIALECT_KVQ_KVQOPS_H

#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kvq {
/// The scheme of one layer of keys or values.
struct LayerScheme {
  /// A QuantAttr or a FullPrecisionAttr.
  mlir::Attribute scheme;
  /// The layer whose codes this layer reconstructs with, if it shares.
  std::optional<unsigned> codesFrom;

  QuantAttr getQuant() const { return llvm::dyn_cast<QuantAttr>(scheme); }
};
} // namespace kvq

#define GET_OP_CLASSES
#include "kvq/Dialect/KVQ/KVQOps.h.inc"

#endif // KVQ_DIALECT_KVQ_KVQOPS_H
