//===- ParallelForms.h - the targets' forms of parallel loops ---*- C++ -*-===//
//
// Private to lib/Transforms: the pieces of the targets' forms of a kernel
// program's parallel loops: the two of kvq-vectorize-parallel, a loop
// widened over lanes (VectorizeParallel.cpp, with Vectorizer.h) and a loop
// over tiles copied side by side (VectorizeTileCopies.cpp), and
// kvq-distribute-parallel's loops inside another (DistributeNested.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LIB_TRANSFORMS_PARALLELFORMS_H
#define KVQ_CODEGEN_LIB_TRANSFORMS_PARALLELFORMS_H

#include "kvq/Codegen/KernelBuilder.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace kvq {

/// Whether `op`, or an op nested in it, uses one of `values`.
bool usesAny(mlir::Operation *op, const llvm::DenseSet<mlir::Value> &values);

/// The ops of `block` that `roots` need, in the block's order: their
/// backward slice within it (values from elsewhere end it).
llvm::SmallVector<mlir::Operation *> getSliceInBlock(mlir::Block *block,
                                                     mlir::ValueRange roots);

/// Whether `op` is a memref load or store of one lane: at `iv` in a
/// unit-stride last dimension, its memref and other indices outside
/// `varying` (the same in every lane).
bool isLaneAccess(mlir::Operation *op, mlir::Value iv,
                  const llvm::DenseSet<mlir::Value> &varying);

/// Elementwise operations whose vector form is the same op on vectors.
bool isElementwiseOp(mlir::Operation *op);

/// Whether `index` is `iv * n` for a constant n; n is returned.
std::optional<int64_t> getScaledIndex(mlir::Value index, mlir::Value iv);

/// Whether `op`, an scf.if on a condition in `varying`, only stores or adds
/// (atomically, as i32) values outside `varying` at places outside it (a
/// flag, a counter): it can run once if any lane takes it.
bool isAnyLaneBranch(mlir::scf::IfOp op,
                     const llvm::DenseSet<mlir::Value> &varying);

/// Emits such a branch at `b`, `lanesTaken` the lanes' conditions (a vector
/// of i1, or an i1 already set if any lane takes it, where the branch adds
/// nothing): once if any lane takes it, each addition times the lanes that
/// do; `mapping` gives the branch's operands.
void widenAnyLaneBranch(mlir::OpBuilder &b, mlir::scf::IfOp op,
                        mlir::Value lanesTaken, mlir::IRMapping &mapping);

/// Each of `vectors` (of one width) halved by `combine`, low half against
/// high half, while it has more than `lanes` lanes and an even number:
/// tiles wider than a register folded into one before they are reduced.
void halveEach(
    KernelBuilder &kb, llvm::MutableArrayRef<mlir::Value> vectors,
    int64_t lanes,
    llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);

/// The host's form of loads of a vector of no power of two of elements (a
/// group's 3 code words): a masked load of the next power of two
/// (OddLoads.cpp).
void populateOddLoadPatterns(mlir::RewritePatternSet &patterns);

/// The host's form of run-time loops over rows around a reduction of each
/// (VectorizeRows.cpp), for a CPU described by `info`.
void populateVectorizeRowsPatterns(mlir::RewritePatternSet &patterns,
                                   const TargetInfo &info);

/// The host's form of parallel loops over tiles (VectorizeTileCopies.cpp),
/// for a CPU described by `info`.
void populateVectorizeTileCopiesPatterns(mlir::RewritePatternSet &patterns,
                                         const TargetInfo &info);

/// The GPU's forms of the parallel loops inside another under `root`, for
/// a target described by `info` (DistributeNested.cpp): runs of a row's
/// elements, teams of a warp's threads, then each thread's own loops.
void distributeNestedLoops(mlir::Operation *root, const TargetInfo &info);

} // namespace kvq

#endif // KVQ_CODEGEN_LIB_TRANSFORMS_PARALLELFORMS_H
