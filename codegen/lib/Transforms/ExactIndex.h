//===- ExactIndex.h - a lane's index as exact integer facts -----*- C++ -*-===//
//
// An integer index at one lane of a vector iteration, exactly: U * scale +
// offset + a sum of terms, U the unknown multiple of the iteration's first
// lane. Unlike a LaneForm (which normalizes offsets modulo their alignment
// and forgets which unknown it holds) it keeps its unknowns by identity, so
// that two lanes' or chunks' indices can be subtracted: whether a vector
// iteration's code words are neighbours in memory (IntegerDots.cpp,
// IntegerDotBlocks.cpp). Indices are taken to be non-negative and to fit
// their types, as the lane analysis takes them.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_TRANSFORMS_EXACTINDEX_H
#define KVQ_CODEGEN_TRANSFORMS_EXACTINDEX_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace kvq {

struct ExactIndex {
  /// `coefficient` times `value`, a multiple of `align`: a value that does
  /// not depend on the lane's induction variables (align 1), or a quotient
  /// or remainder of the unknown part by a constant, named by its op.
  struct Term {
    mlir::Value value;
    int64_t coefficient, align;

    bool operator==(const Term &other) const {
      return value == other.value && coefficient == other.coefficient &&
             align == other.align;
    }
  };

  int64_t scale = 0, offset = 0;
  llvm::SmallVector<Term> terms;

  bool isConstant() const { return scale == 0 && terms.empty(); }
  /// Whether `other` differs from this index by a constant.
  bool sameUnknowns(const ExactIndex &other) const {
    return scale == other.scale && terms == other.terms;
  }
  bool operator==(const ExactIndex &other) const {
    return offset == other.offset && sameUnknowns(other);
  }
  /// A number the unknown part U * scale + terms is a multiple of; 0 where
  /// it has none (it is 0).
  int64_t getAlign() const;
};

/// One lane, as getExactIndex takes it: each of `known` (an induction
/// variable, or a value the lane analysis takes as aligned in place of it)
/// exactly its ExactIndex; a value computed from `ivs` other than through
/// `known` has none.
struct ExactLane {
  llvm::SmallVector<std::pair<mlir::Value, ExactIndex>> known;
  llvm::SmallVector<mlir::Value> ivs;
};

/// Whether `value` is computed from any of `ivs` (or by ops with regions,
/// which may read them inside).
bool dependsOn(mlir::Value value, llvm::ArrayRef<mlir::Value> ivs);

/// `value` at `lane` as an ExactIndex: sums, differences and constant
/// multiples of `known` values and of values that do not depend on the
/// induction variables, and quotients and remainders by constants d of
/// such sums N + offset (0 <= offset) where d divides N's alignment, or N's
/// alignment m divides d and offset < m; none where it is not such.
std::optional<ExactIndex> getExactIndex(mlir::Value value,
                                        const ExactLane &lane);

/// `value` at the first of `lanes`, where at lane i it is that plus i *
/// `stride` exactly (a group's or chunk's words after the first's); none
/// otherwise.
std::optional<ExactIndex> getSpacedIndex(mlir::Value value,
                                         llvm::ArrayRef<ExactLane> lanes,
                                         int64_t stride);

/// Whether `value` is the same at every one of `lanes` (a memref or a word
/// read at the same place by each): it does not depend on their induction
/// variables, or it is an index the same at each, or pure ops or loads of
/// such values give it.
bool isSameAt(mlir::Value value, llvm::ArrayRef<ExactLane> lanes);

} // namespace kvq

#endif // KVQ_CODEGEN_TRANSFORMS_EXACTINDEX_H
