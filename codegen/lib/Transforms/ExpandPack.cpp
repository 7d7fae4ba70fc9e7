//===- ExpandPack.cpp - kvq.pack to each target's shifts and permutes -----===//
//
// Where a thread's vectors are registers whose lanes one instruction shifts
// or permutes as a whole (the CPU's SIMD registers), codes are merged a lane
// pair at a time: through bytes where the stream is whole words of whole
// bytes, else by merging adjacent lanes while two fields fit one. Where a
// vector is a run of a thread's scalar registers (the GPU), and in any
// module no kvq.target describes, each code is shifted into its word.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvq {
#define GEN_PASS_DEF_KVQEXPANDPACK
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// A constant of `type` (a vector of integers) in every lane.
Value splatConstant(KernelBuilder &kb, VectorType type, int64_t value) {
  return arith::ConstantOp::create(
      kb.builder(), kb.getLoc(), type,
      DenseIntElementsAttr::get(
          type, APInt(type.getElementTypeBitWidth(), uint64_t(value))));
}

int64_t getLanes(Value vector) {
  return cast<VectorType>(vector.getType()).getNumElements();
}

/// Each code shifted into its word(s) and ORed there (packWords): a shift
/// and an OR per code, the form of scalar registers.
struct PackByShifts : OpRewritePattern<PackOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PackOp op,
                                PatternRewriter &rewriter) const override {
    KernelBuilder kb(rewriter, op.getLoc());
    SmallVector<Value> words = packWords(
        kb, getLanes(op.getCodes()), op.getBits(), [&](unsigned k) -> Value {
          return vector::ExtractOp::create(rewriter, op.getLoc(), op.getCodes(),
                                           ArrayRef<int64_t>{k});
        });
    rewriter.replaceOpWithNewOp<vector::FromElementsOp>(
        op, op.getWords().getType(), words);
    return success();
  }
};

/// `bytes` (vector of i8, fields of `width` bits in the low bits of every
/// half of a `laneBits` lane, nothing above them) with the two fields of
/// each lane merged: the high one moves down next to the low one, x & low |
/// (x >> (laneBits / 2 - width)) & high: a shift and a bit select (one
/// vpternlog on x86) for the whole vector.
Value mergeHalves(KernelBuilder &kb, Value bytes, unsigned laneBits,
                  unsigned width) {
  OpBuilder &b = kb.builder();
  Location loc = kb.getLoc();
  auto type = VectorType::get({getLanes(bytes) * 8 / laneBits},
                              b.getIntegerType(laneBits));
  Value x = vector::BitCastOp::create(b, loc, type, bytes);
  uint64_t low = (uint64_t(1) << width) - 1;
  uint64_t high =
      (low << width) &
      (laneBits == 64 ? ~uint64_t(0) : (uint64_t(1) << laneBits) - 1);
  Value moved = kb.shrU(x, splatConstant(kb, type, laneBits / 2 - width));
  Value merged =
      kb.bitOr(kb.bitAnd(x, splatConstant(kb, type, int64_t(low))),
               kb.bitAnd(moved, splatConstant(kb, type, int64_t(high))));
  return vector::BitCastOp::create(b, loc, bytes.getType(), merged);
}

/// A stream of whole words from codes in multiples of 8: every code to a
/// byte, adjacent fields merged in 16-, 32- and 64-bit lanes (8 codes in
/// the low 8 * bits bits of each i64, little-endian), then the low `bits`
/// bytes of each i64 are the stream. Three shifts, three selects and one
/// byte permute per 64 codes, where shifting each code to its word and
/// ORing them takes a shift and an OR per code.
struct PackThroughBytes : OpRewritePattern<PackOp> {
  PackThroughBytes(MLIRContext *ctx) : OpRewritePattern(ctx, /*benefit=*/3) {}

  LogicalResult matchAndRewrite(PackOp op,
                                PatternRewriter &rewriter) const override {
    int64_t count = getLanes(op.getCodes());
    unsigned bits = op.getBits();
    if (count % 8 != 0 || count * bits % 32 != 0)
      return rewriter.notifyMatchFailure(op, "not whole words of whole bytes");
    KernelBuilder kb(rewriter, op.getLoc());
    Value bytes = arith::TruncIOp::create(
        rewriter, op.getLoc(), VectorType::get({count}, rewriter.getI8Type()),
        op.getCodes());
    for (unsigned laneBits = 16, width = bits; laneBits <= 64;
         laneBits *= 2, width *= 2)
      bytes = mergeHalves(kb, bytes, laneBits, width);
    SmallVector<int64_t> stream;
    for (int64_t q = 0; q < count / 8; ++q)
      for (unsigned i = 0; i < bits; ++i)
        stream.push_back(8 * q + i);
    rewriter.replaceOpWithNewOp<vector::BitCastOp>(op, op.getWords().getType(),
                                                   kb.shuffle(bytes, stream));
    return success();
  }
};

/// Merges adjacent lanes of `codes` (vector<n x i32>, fields of `width` bits
/// with nothing above them, 2 * width <= 32): lane i of the result is lane 2i
/// | lane 2i+1 << width. Viewed as i64 lanes (little-endian hosts: lane 2i
/// is the low half), x | x >> (32 - width) puts exactly that in each low
/// half (the low lane's field ends below bit 32 - width), and truncation
/// keeps the low halves.
Value mergeAdjacentLanes(KernelBuilder &kb, Value codes, unsigned width) {
  OpBuilder &b = kb.builder();
  Location loc = kb.getLoc();
  int64_t lanes = getLanes(codes);
  auto wide = VectorType::get({lanes / 2}, b.getI64Type());
  Value x = vector::BitCastOp::create(b, loc, wide, codes);
  Value merged = kb.bitOr(x, kb.shrU(x, splatConstant(kb, wide, 32 - width)));
  return arith::TruncIOp::create(
      b, loc, VectorType::get({lanes / 2}, b.getI32Type()), merged);
}

/// Any other stream on vector registers: adjacent lanes merged pairwise
/// while two fields fit a lane (a shift, an OR and a truncation per step
/// for the whole vector, instead of one per code), then the merged fields
/// shifted into their words.
struct PackByMergingLanes : OpRewritePattern<PackOp> {
  PackByMergingLanes(MLIRContext *ctx) : OpRewritePattern(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(PackOp op,
                                PatternRewriter &rewriter) const override {
    KernelBuilder kb(rewriter, op.getLoc());
    int64_t count = getLanes(op.getCodes());
    Value merged = op.getCodes();
    int64_t left = count;
    unsigned width = op.getBits();
    for (; left % 2 == 0 && 2 * width <= 32; left /= 2, width *= 2)
      merged = mergeAdjacentLanes(kb, merged, width);
    // Merged lane i holds codes [i * count / left, ...), `width` bits.
    int64_t fieldCodes = count / left;
    unsigned words = getLanes(op.getWords());
    SmallVector<Value> fields, result(words);
    for (int64_t i = 0; i < left; ++i)
      fields.push_back(kb.toI64(vector::ExtractOp::create(
          rewriter, op.getLoc(), merged, ArrayRef<int64_t>{i})));
    for (unsigned w = 0; w < words; ++w) {
      for (int64_t i = 0; i < left; ++i) {
        std::optional<WordShift> shift =
            shiftIntoWord(i * fieldCodes * op.getBits(), width, w);
        if (!shift)
          continue;
        Value part = shift->right ? kb.shrU(fields[i], kb.i64(shift->right))
                                  : kb.shl(fields[i], kb.i64(shift->left));
        result[w] = result[w] ? kb.bitOr(result[w], part) : part;
      }
      result[w] = kb.toI32(result[w]);
    }
    rewriter.replaceOpWithNewOp<vector::FromElementsOp>(
        op, op.getWords().getType(), result);
    return success();
  }
};

/// The forms of `info`'s target: PackByShifts everywhere, the vector
/// register forms before it where a thread has them.
void populatePackPatterns(RewritePatternSet &patterns, const TargetInfo &info) {
  patterns.add<PackByShifts>(patterns.getContext());
  if (info.lanePermutes)
    patterns.add<PackThroughBytes, PackByMergingLanes>(patterns.getContext());
}

/// One walk of `root`, each kvq.pack rewritten once (no folding of the
/// rest, which a greedy driver would revisit in every kernel).
LogicalResult expandPacks(Operation *root, const TargetInfo &info) {
  RewritePatternSet patterns(root->getContext());
  populatePackPatterns(patterns, info);
  walkAndApplyPatterns(root, std::move(patterns));
  return success();
}

struct KVQExpandPackPass : kvq::impl::KVQExpandPackBase<KVQExpandPackPass> {
  void runOnOperation() override {
    // The kernel modules by their targets, then what is left anywhere.
    if (failed(forEachKernelModule(getOperation(), expandPacks)) ||
        failed(expandPacks(getOperation(), TargetInfo())))
      signalPassFailure();
  }
};

} // namespace
