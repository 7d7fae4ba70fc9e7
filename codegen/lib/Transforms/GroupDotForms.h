//===- GroupDotForms.h - the forms of kvq.group_dot -------------*- C++ -*-===//
//
// kvq-expand-group-dots lowers each kvq.group_dot by the forms of its
// module's target, one family a file. Where a thread's vectors are registers
// of lanes (TargetInfo::lanePermutes): GroupDotPairs.cpp (a row's groups
// on integer pair dots, where the target has them), GroupDotLanes.cpp (each
// lane of the loop around sums its own group's elements, where that loop
// vectorizes), then GroupDotCarried.cpp (the loop summing a row's groups
// carries the products as vectors). Then ExpandGroupDots.cpp (each dot summed
// on its own, everywhere).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H
#define KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

namespace kvq {

/// The kvq.group_dot whose dots, in order, are all `loop`'s sums (a 1-D
/// scf.parallel summing a row's groups), or null.
GroupDotOp getSummedGroupDot(mlir::scf::ParallelOp loop);

/// The memref `memref` views, through view-like ops.
mlir::Value getViewRoot(mlir::Value memref);

/// `values` of the loop whose body is `body` at its iteration `g`, their
/// ops in `body` cloned at `b`; `mapping` gives what they read from around.
llvm::SmallVector<mlir::Value> cloneAt(mlir::OpBuilder &b,
                                       mlir::ValueRange values,
                                       mlir::Block *body, mlir::Value g,
                                       mlir::IRMapping &mapping);

/// `values` at group `g` (a constant) of the loop whose body is `body`,
/// their ops in `body` cloned once at `b` (isHoistable).
llvm::SmallVector<mlir::Value> cloneAtGroup(mlir::OpBuilder &b,
                                            mlir::ValueRange values,
                                            mlir::Block *body, int64_t g);

/// Whether `value`'s ops in `body` are pure or loads and take nothing but
/// `body`'s induction variable and values `outer` sees defined outside it.
bool isHoistable(mlir::Value value, mlir::Block *body,
                 mlir::LoopLikeOpInterface outer);

/// Whether an op in `loop` writes memory that one of `roots` views, or
/// memory it cannot name. Views of different roots are taken to be apart,
/// as a kernel program's buffers are (each its own block-local allocation
/// or argument region).
bool writesAny(mlir::LoopLikeOpInterface loop,
               llvm::ArrayRef<mlir::Value> roots);

/// A loop summing all the group dots of a row, inside a loop over the rows
/// that reads each tile's whole row unchanged (a span=channels key token's
/// groups against each head's query), on the target's 16-bit pair dots
/// where it has them: each row rounded once before the loop over the rows,
/// per row its groups' codes a vector load and one pair dot a head and
/// vector of code pairs (ChannelPairs.h). `info` describes the target.
void populatePairGroupDotPatterns(mlir::RewritePatternSet &patterns,
                                  const TargetInfo &info);

/// A parallel loop over rows whose iteration sums all the group dots of its
/// row and stores each head's sum (a split's span=channels key tokens, a
/// span=tokens value slice's channels), on the warp's matrix unit (#kvq.mma
/// m16n8k16) where the target has it: a warp's tiles of 16 rows the A
/// operands, the heads B's columns.
void populateMatrixGroupDotPatterns(mlir::RewritePatternSet &patterns,
                                    const TargetInfo &info);

/// An `scf.parallel` over [0, N) around a loop summing its lanes' group
/// dots, where the groups of adjacent lanes lie side by side (a span=tokens
/// value slice's channels): each dot summed element by element, the
/// codes extracted at compile-time positions of words each lane loads, so
/// that the loop around vectorizes (Vectorizer) with the channels as lanes
/// and the tiles' elements broadcast. `info` describes the target's vector
/// registers.
void populateLaneGroupDotPatterns(mlir::RewritePatternSet &patterns,
                                  const TargetInfo &info);

/// An `scf.parallel` whose reductions are the sums of one kvq.group_dot's
/// dots: each head's products with the reconstructed group carried as a
/// vector of the group's lanes (halved to keep the heads' sums in the
/// target's registers), reduced once after the loop. `info` describes the
/// target's vector registers.
void populateCarriedGroupDotPatterns(mlir::RewritePatternSet &patterns,
                                     const TargetInfo &info);

} // namespace kvq

#endif // KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H
