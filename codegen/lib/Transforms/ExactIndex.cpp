//===- ExactIndex.cpp - a lane's index as exact integer facts -------------===//

#include "ExactIndex.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <numeric>

using namespace mlir;
using namespace kvq;

int64_t ExactIndex::getAlign() const {
  int64_t align = scale < 0 ? -scale : scale;
  for (const Term &term : terms)
    align = std::gcd(align, term.coefficient * term.align);
  return align;
}

bool kvq::dependsOn(Value value, ArrayRef<Value> ivs) {
  if (llvm::is_contained(ivs, value))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  llvm::SetVector<Operation *> slice;
  if (failed(getBackwardSlice(def, &slice, options)))
    return true;
  return llvm::any_of(slice, [&](Operation *op) {
    return op->getNumRegions() > 0 || llvm::any_of(ivs, [&](Value iv) {
             return llvm::is_contained(op->getOperands(), iv);
           });
  });
}

/// `x` times `k`.
static ExactIndex scaled(ExactIndex x, int64_t k) {
  x.scale *= k;
  x.offset *= k;
  for (ExactIndex::Term &term : x.terms)
    term.coefficient *= k;
  return x;
}

/// (N + offset) / d or mod d, N the unknown part of `x` and `op` the
/// quotient or remainder: exact where d divides N's alignment m (the
/// remainder a constant), or m divides d and 0 <= offset < m (the offset
/// passes through the remainder; the quotient is N's); N's part that is
/// not U * scale is then a term named by `op`.
static std::optional<ExactIndex> divide(Operation *op, const ExactIndex &x,
                                        int64_t d) {
  bool remainder = isa<arith::RemUIOp>(op);
  Value result = op->getResult(0);
  int64_t m = x.getAlign();
  if (d <= 0 || x.offset < 0)
    return std::nullopt;
  if (m % d == 0) {
    if (remainder)
      return ExactIndex{0, x.offset % d, {}};
    if (x.terms.empty())
      return ExactIndex{x.scale / d, x.offset / d, {}};
    return ExactIndex{0, x.offset / d, {{result, 1, m / d}}};
  }
  if (d % m != 0 || x.offset >= m)
    return std::nullopt;
  if (remainder)
    return ExactIndex{0, x.offset, {{result, 1, m}}};
  return ExactIndex{0, 0, {{result, 1, 1}}};
}

std::optional<ExactIndex> kvq::getExactIndex(Value value,
                                             const ExactLane &lane) {
  for (const auto &[known, form] : lane.known)
    if (value == known)
      return form;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.isNegative() || constant.getActiveBits() > 40
               ? std::nullopt
               : std::optional(ExactIndex{0, constant.getSExtValue(), {}});
  if (!dependsOn(value, lane.ivs))
    return ExactIndex{0, 0, {{value, 1, 1}}};
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto get = [&](unsigned i) { return getExactIndex(op->getOperand(i), lane); };
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtUIOp,
          arith::TruncIOp>(op))
    return get(0);
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::DivUIOp,
           arith::RemUIOp>(op))
    return std::nullopt;
  std::optional<ExactIndex> x = get(0), y = get(1);
  if (!x || !y)
    return std::nullopt;
  if (isa<arith::AddIOp, arith::SubIOp>(op)) {
    ExactIndex sum = *x, other = scaled(*y, isa<arith::AddIOp>(op) ? 1 : -1);
    sum.scale += other.scale;
    sum.offset += other.offset;
    llvm::append_range(sum.terms, other.terms);
    return sum;
  }
  if (isa<arith::MulIOp>(op)) {
    if (y->isConstant() && y->offset <= (int64_t(1) << 20))
      return scaled(*x, y->offset);
    if (x->isConstant() && x->offset <= (int64_t(1) << 20))
      return scaled(*y, x->offset);
    return std::nullopt;
  }
  if (!y->isConstant())
    return std::nullopt;
  return divide(op, *x, y->offset);
}

std::optional<ExactIndex>
kvq::getSpacedIndex(Value value, ArrayRef<ExactLane> lanes, int64_t stride) {
  std::optional<ExactIndex> first;
  for (auto [i, lane] : llvm::enumerate(lanes)) {
    std::optional<ExactIndex> at = getExactIndex(value, lane);
    if (!at || (first && (!at->sameUnknowns(*first) ||
                          at->offset != first->offset + int64_t(i) * stride)))
      return std::nullopt;
    if (!first)
      first = at;
  }
  return first;
}

bool kvq::isSameAt(Value value, ArrayRef<ExactLane> lanes) {
  if (lanes.empty() || !dependsOn(value, lanes.front().ivs))
    return true;
  if (value.getType().isIntOrIndex()) {
    std::optional<ExactIndex> first = getExactIndex(value, lanes.front());
    if (first && llvm::all_of(lanes.drop_front(), [&](const ExactLane &lane) {
          std::optional<ExactIndex> other = getExactIndex(value, lane);
          return other && *other == *first;
        }))
      return true;
  }
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumRegions() > 0 ||
      !(isPure(op) || isa<memref::LoadOp, memref::ViewOp>(op)))
    return false;
  return llvm::all_of(op->getOperands(),
                      [&](Value operand) { return isSameAt(operand, lanes); });
}
