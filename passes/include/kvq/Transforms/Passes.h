//===- Passes.h - kvq transformation passes ---------------------*- C++ -*-===//

#ifndef KVQ_TRANSFORMS_PASSES_H
#define KVQ_TRANSFORMS_PASSES_H

#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kvq {

#define GEN_PASS_DECL
#include "kvq/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kvq/Transforms/Passes.h.inc"

} // namespace kvq

#endif // KVQ_TRANSFORMS_PASSES_H
