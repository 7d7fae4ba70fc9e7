//===- GroupDotForms.h - the forms of kvq.group_dot -------------*- C++ -*-===//
//
// kvq-expand-group-dots lowers each kvq.group_dot by the forms of its
// module's target, one family a file: GroupDotCarried.cpp (the loop summing
// a row's groups carries the products as vectors, where a thread's vectors
// are registers of lanes: TargetInfo::lanePermutes) before
// ExpandGroupDots.cpp (each dot summed on its own, everywhere).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H
#define KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H

#include "kvq/Codegen/KernelBuilder.h"

#include "mlir/IR/PatternMatch.h"

namespace kvq {

/// An `scf.parallel` whose reductions are the sums of one kvq.group_dot's
/// dots: each head's products with the reconstructed group carried as a
/// vector of the group's lanes (halved to keep the heads' sums in the
/// target's registers), reduced once after the loop. `info` describes the
/// target's vector registers.
void populateCarriedGroupDotPatterns(mlir::RewritePatternSet &patterns,
                                     const TargetInfo &info);

} // namespace kvq

#endif // KVQ_CODEGEN_TRANSFORMS_GROUPDOTFORMS_H
