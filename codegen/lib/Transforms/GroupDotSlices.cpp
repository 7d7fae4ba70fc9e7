//===- GroupDotSlices.cpp - what the row forms of kvq.group_dot share -----===//
//
// The forms that take a whole row's group dots at once (GroupDotPairs.cpp,
// GroupDotMatrix.cpp) read a group's codes, parameters and tiles outside
// the loop that sums them: these find the ops that give them, clone them at
// a group, and check that the loops around write none of what they read.
//
//===----------------------------------------------------------------------===//

#include "GroupDotForms.h"
#include "ParallelForms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace kvq;

Value kvq::getViewRoot(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

SmallVector<Value> kvq::cloneAt(OpBuilder &b, ValueRange values, Block *body,
                                Value g, IRMapping &mapping) {
  mapping.map(body->getArgument(0), g);
  for (Operation *op : getSliceInBlock(body, values))
    b.clone(*op, mapping);
  return llvm::map_to_vector(
      values, [&](Value value) { return mapping.lookupOrDefault(value); });
}

SmallVector<Value> kvq::cloneAtGroup(OpBuilder &b, ValueRange values,
                                     Block *body, int64_t g) {
  IRMapping mapping;
  return cloneAt(
      b, values, body,
      arith::ConstantIndexOp::create(b, body->getParentOp()->getLoc(), g),
      mapping);
}

bool kvq::isHoistable(Value value, Block *body, LoopLikeOpInterface outer) {
  for (Operation *op : getSliceInBlock(body, value)) {
    if (op->getNumRegions() != 0 ||
        !(isPure(op) || isa<memref::LoadOp, vector::LoadOp>(op)))
      return false;
    for (Value operand : op->getOperands())
      if (operand.getParentBlock() != body &&
          !outer.isDefinedOutsideOfLoop(operand))
        return false;
  }
  return true;
}

bool kvq::writesAny(LoopLikeOpInterface loop, ArrayRef<Value> roots) {
  WalkResult result = loop->walk([&](Operation *op) {
    // A prefetch writes nothing; other ops of unknown effects may write.
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return isa<memref::PrefetchOp>(op) ||
                     op->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      if (!isa<MemoryEffects::Write>(effect.getEffect()))
        continue;
      Value written = effect.getValue();
      if (!written || llvm::is_contained(roots, getViewRoot(written)))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}
