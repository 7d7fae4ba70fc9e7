//===- AttendMatrix.cpp - attend loops on the warp's matrix unit ----------===//
//
// Where the target has a matrix unit (MatrixUnit: mma.sync m16n8k16 on the
// GPU), two loops of the attend kernel are products of matrices with f16
// operands and f32 sums, as FlashAttention's and BitDecoding's kernels do:
// the query heads of a kv-head are B's columns, so a cached element costs
// its unpacking once instead of one FMA per head (docs/Rationale.md,
// "Matrix forms").
//
// span=channels values: a 16-token step adds V^T (channels x tokens) times
// P^T (tokens x heads). Its fragments are built straight from the codes:
//   - thread (groupID g, threadID_in_group t) of a warp owns the rows g and
//     g + 8 of every 16-channel tile; its rows are the D/8 consecutive
//     channels from g * D / 8, so their codes are D/8 * b bits of a token:
//     one word for D = 128 at 2 bits, loaded once per token;
//   - A's f16x2 words pair tokens (2t, 2t + 1): prmt puts byte j of the two
//     tokens' words in the low byte of each half, lop3 keeps the code at
//     position p of that byte and ORs in the exponent of 1024, so the half
//     is 1024 + 2^(b p) c exactly; subtracting 1024 and multiplying by the
//     token's group slope / 2^(b p) gives c s. Tile i takes bytes 2(i / P)
//     (row g) and 2(i / P) + 1 (row g + 8) at position i % P (P = 8 / b
//     codes per byte), so each tile has one power 2^(b p);
//   - B is the weights p of head g for the thread's tokens; the offsets
//     (sum_t p_t z_t per group and head) are one more product, with the
//     group's offsets as row g of A.
// Warps take every warps-th step and add their sums through shared memory.
// Dequantized values and weights are rounded to f16 (2^-11 relative) before
// the f32 sums: the attention tolerance of numerics.md section 5 holds.
//
// span=tokens keys: a block's scores are K (tokens x channels) times its
// folded queries (scoreTokenBlocksOnMatrix).
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

/// Tokens of one matrix step (the k of m16n8k16).
static constexpr unsigned kStepTokens = MatrixUnit::kK;
/// Tokens of one tile whose rows are tokens (the m of m16n8k16).
static constexpr unsigned kTileTokens = MatrixUnit::kM;

/// An f16x2 word as two halves, and back (arith casts keep shapes).
static Value halvesOf(KernelBuilder &kb, Value word) {
  OpBuilder &b = kb.builder();
  return LLVM::BitcastOp::create(b, kb.getLoc(),
                                 VectorType::get({2}, b.getF16Type()), word);
}

static Value wordOf(KernelBuilder &kb, Value halves) {
  OpBuilder &b = kb.builder();
  return LLVM::BitcastOp::create(b, kb.getLoc(), b.getI32Type(), halves);
}

/// An f16x2 word (i32) of two f32 values, rounded to nearest.
static Value packHalves(KernelBuilder &kb, Value lo, Value hi) {
  OpBuilder &b = kb.builder();
  Value pair = vector::FromElementsOp::create(
      b, kb.getLoc(), VectorType::get({2}, b.getF32Type()), {lo, hi});
  Value halves = arith::TruncFOp::create(
      b, kb.getLoc(), VectorType::get({2}, b.getF16Type()), pair);
  return wordOf(kb, halves);
}

/// The f16x2 constant (lo, hi).
static Value halvesConstant(KernelBuilder &kb, double lo, double hi) {
  OpBuilder &b = kb.builder();
  auto type = VectorType::get({2}, b.getF16Type());
  SmallVector<APFloat> values = {b.getF16FloatAttr(lo).getValue(),
                                 b.getF16FloatAttr(hi).getValue()};
  return arith::ConstantOp::create(b, kb.getLoc(), type,
                                   DenseElementsAttr::get(type, values));
}

static Value splatHalves(KernelBuilder &kb, double value) {
  return halvesConstant(kb, value, value);
}

/// C's column `column` of thread (g, t): head 2t + column of the tile.
static Value headOfC(KernelBuilder &kb, Value t, unsigned column) {
  return kb.add(kb.mul(t, kb.i32(2)), kb.i32(column));
}

/// Runs `body` once on every thread of the block (for a tile of `heads`
/// heads), then waits for them all.
static void
forEachFragmentThread(KernelBuilder &kb, unsigned heads,
                      function_ref<void(const FragmentThread &)> body) {
  KernelTarget &target = kb.getTarget();
  unsigned warpSize = target.getMaxWorkers();
  target.parallelFor(kb, kb.i32(target.getBlockThreads()), [&](Value thread) {
    Value lane = kb.remU(thread, kb.i32(warpSize));
    Value g = kb.divU(lane, kb.i32(4));
    body({kb.divU(thread, kb.i32(warpSize)), g, kb.remU(lane, kb.i32(4)),
          kb.select(kb.ult(g, kb.i32(heads)), g, kb.i32(heads - 1))});
  });
}

/// The bits of `x` under `mask` ORed into the exponent of 1024 in each
/// half: the f16 pair 1024 + the masked bits as an integer, exactly.
static Value biasedHalves(KernelBuilder &kb, MatrixUnit &unit, Value x,
                          Value mask) {
  return halvesOf(kb, unit.maskOr(kb, x, mask, kb.i32(0x64006400)));
}

/// The codes under `mask` (one b-bit position p of the low byte of each
/// half of `bytes`) as the f16 pair 2^(b p) c: biasedHalves less 1024,
/// exact.
static Value codeHalves(KernelBuilder &kb, MatrixUnit &unit, Value bytes,
                        Value mask) {
  return kb.fsub(biasedHalves(kb, unit, bytes, mask), splatHalves(kb, 1024.0));
}

/// Runs thread's warp over iterations warp, warp + warps, ... below
/// `count`, the sums starting at `zeros`, and stores them with `store`; a
/// warp with no iteration stores `zeros`, so that no zeros are carried past
/// a loop that might not run. Each iteration's memory is loaded one
/// iteration ahead: `load(i)` issues iteration i's loads and
/// `compute(i, loaded, sums)` uses them; an iteration loads the next one's
/// (the last reloads its own) before it computes, so that the loads are in
/// flight during a whole step's arithmetic instead of stalling its first
/// instructions.
static void sumWarpSharePipelined(
    KernelBuilder &kb, const FragmentThread &thread, Value count,
    ArrayRef<Value> zeros, function_ref<SmallVector<Value>(Value)> load,
    function_ref<SmallVector<Value>(Value, ValueRange, ValueRange)> compute,
    function_ref<void(ArrayRef<Value>)> store) {
  unsigned warps = getWarps(kb.getTarget());
  size_t sums = zeros.size();
  kb.ifThenElse(
      kb.ult(thread.warp, count), {},
      [&]() -> SmallVector<Value> {
        SmallVector<Value> init(zeros.begin(), zeros.end());
        llvm::append_range(init, load(thread.warp));
        Value lastIteration = kb.sub(count, kb.i32(1));
        SmallVector<Value> result = kb.forLoop(
            thread.warp, count, kb.i32(warps), init,
            [&](Value i, ValueRange carried) -> SmallVector<Value> {
              Value ahead = kb.add(i, kb.i32(warps));
              SmallVector<Value> next =
                  load(kb.select(kb.ult(ahead, count), ahead, lastIteration));
              SmallVector<Value> out = compute(i, carried.drop_front(sums),
                                               carried.take_front(sums));
              llvm::append_range(out, next);
              return out;
            });
        store(ArrayRef<Value>(result).take_front(sums));
        return {};
      },
      [&]() -> SmallVector<Value> {
        store(zeros);
        return {};
      });
}

/// sumWarpSharePipelined for a `step` that loads what it uses itself.
static void sumWarpShare(KernelBuilder &kb, const FragmentThread &thread,
                         Value count, ArrayRef<Value> zeros,
                         const KernelBuilder::LoopBody &step,
                         function_ref<void(ArrayRef<Value>)> store) {
  sumWarpSharePipelined(
      kb, thread, count, zeros, [](Value) { return SmallVector<Value>(); },
      [&](Value i, ValueRange, ValueRange sums) { return step(i, sums); },
      store);
}

void AttendEmitter::storeMatrixShare(
    const FragmentThread &thread, Value rowChannel0, unsigned rowChannels,
    function_ref<Value(unsigned channel, unsigned column)> valueAt) {
  // Columns 2t and 2t + 1 of C are heads; the thread's channels are
  // consecutive, stored 16 (or 8) bytes at a time.
  unsigned width = rowChannels % 4 == 0 ? 4 : 2;
  auto type = VectorType::get({width}, kb.builder().getF32Type());
  for (unsigned column = 0; column < 2; ++column) {
    Value h = headOfC(kb, thread.t, column);
    kb.ifThen(kb.ult(h, kb.i32(heads)), [&] {
      Value first =
          f32Row(kb, matrixPartials,
                 kb.add(kb.mul(kb.add(kb.mul(thread.warp, kb.i32(heads)), h),
                               kb.i32(dim)),
                        rowChannel0));
      for (unsigned c = 0; c < rowChannels; c += width) {
        SmallVector<Value> lanes;
        for (unsigned k = 0; k < width; ++k)
          lanes.push_back(valueAt(c + k, column));
        kb.store(vector::FromElementsOp::create(kb.builder(), kb.getLoc(), type,
                                                lanes),
                 first, kb.i64(4 * int64_t(c)), 4 * width);
      }
    });
  }
}

void AttendEmitter::addMatrixShares() {
  // The warps' shares added 4 floats (16 bytes) at a time.
  KernelTarget &target = kb.getTarget();
  unsigned warps = getWarps(target);
  auto quad = VectorType::get({4}, kb.builder().getF32Type());
  target.parallelFor(kb, kb.i32(heads * dim / 4), [&](Value i) {
    Value first = f32Row(kb, matrixPartials, kb.mul(i, kb.i32(4)));
    Value sum = kb.load(quad, first, kb.i64(0), 16);
    for (unsigned w = 1; w < warps; ++w)
      sum = kb.fadd(
          sum, kb.load(quad, first, kb.i64(int64_t(w) * heads * dim * 4), 16));
    kb.store(sum, valueSums, kb.mul(kb.toI64(i), kb.i64(16)), 16);
  });
}

void AttendEmitter::sumChannelGroupValuesOnMatrix(Range range) {
  const SliceLayout &values = slice(false);
  QuantAttr quant = values.quant;
  KernelTarget &target = kb.getTarget();
  MatrixUnit &unit = *target.getMatrixUnit();
  unsigned bits = quant.getBits(), group = quant.getGroup();
  unsigned rowChannels = dim / 8, rowBytes = rowChannels * bits / 8;
  unsigned rowWords = std::max(1u, rowBytes / 4);
  unsigned perByte = 8 / bits, tiles = dim / MatrixUnit::kM;
  unsigned tokenBytes = dim * bits / 8, groups = values.GroupsPerToken;
  Quantizer quantizer(kb, quant);
  Value sink = regions[1].sink;
  Value first = kb.mul(kb.divU(kb.sub(range.begin, sink), kb.i32(kStepTokens)),
                       kb.i32(kStepTokens));
  Value last = kb.maxS(kb.sub(range.end, sink), first);
  Value steps = kb.divU(kb.add(kb.sub(last, first), kb.i32(kStepTokens - 1)),
                        kb.i32(kStepTokens));
  // The thread's tokens of a step: k-columns 2t + {0, 1, 8, 9}.
  const unsigned columns[4] = {0, 1, 8, 9};

  forEachFragmentThread(kb, heads, [&](const FragmentThread &thread) {
    Value g = thread.g, t = thread.t;
    Value headOfB = thread.headOfB;
    Value rowByte = kb.mul(g, kb.i32(rowBytes));
    Value groupIndex = kb.divU(kb.mul(g, kb.i32(rowChannels)), kb.i32(group));
    Value column0 = kb.mul(t, kb.i32(2));
    // One step: the thread's codes, slopes, offsets and weights of its four
    // tokens, whose addresses differ by constants. Steps that straddle the
    // range (`partial`, warp-uniform) give tokens outside it slope, offset
    // and weight 0, so that no stale page data reaches the sums.
    Value pageTokens = kb.i32(layout.pageTokens);
    // The page memory of one step, loaded a step ahead of its use
    // (sumWarpSharePipelined): per token (column) its rowWords code words
    // from a word boundary, its group's scale bits and (where the slice
    // stores them) its zero-point bits.
    bool hasZeros = values.ZerosOffset >= 0;
    unsigned perColumn = rowWords + 1 + (hasZeros ? 1 : 0);
    auto loadStep = [&](Value q0) -> SmallVector<Value> {
      SliceAccess access(kb, tensor(false), values, layout.pageTokens,
                         args.pages[1], tableRow(false), q0, head);
      Value pageToken = kb.add(kb.remU(q0, pageTokens), column0);
      Value byte = kb.add(kb.mul(pageToken, kb.i32(tokenBytes)), rowByte);
      Value codes =
          kb.gep(access.getCodesBase(), kb.toI64(kb.bitAnd(byte, kb.i32(~3))));
      Value n = kb.add(kb.mul(pageToken, kb.i32(groups)), groupIndex);
      SmallVector<Value> loaded;
      for (unsigned column : columns) {
        for (unsigned w = 0; w < rowWords; ++w)
          loaded.push_back(kb.load(kb.builder().getI32Type(), codes,
                                   kb.i64(int64_t(column) * tokenBytes + 4 * w),
                                   4, /*invariant=*/true));
        loaded.push_back(access.loadScaleBits(quantizer, n, column * groups));
        if (hasZeros)
          loaded.push_back(access.loadZeroBits(quantizer, n, column * groups));
      }
      return loaded;
    };
    auto emitStep = [&](Value q0, ValueRange loaded, ValueRange acc,
                        bool partial) -> SmallVector<Value> {
      Value pageToken = kb.add(kb.remU(q0, pageTokens), column0);
      Value token = kb.add(kb.add(q0, column0), sink);
      // The thread's code bytes of its first token start `shift` bits into
      // its first word.
      Value byte = kb.add(kb.mul(pageToken, kb.i32(tokenBytes)), rowByte);
      Value shift = kb.mul(kb.bitAnd(byte, kb.i32(3)), kb.i32(8));
      Value weightRow =
          partial ? Value()
                  : f32Row(kb, scores,
                           kb.add(kb.mul(headOfB, kb.i32(splitTokens)),
                                  kb.sub(token, splitRange.begin)));
      SmallVector<SmallVector<Value, 4>, 4> words;
      SmallVector<Value, 4> slopes, offsets, weights;
      for (auto [c, column] : llvm::enumerate(columns)) {
        ValueRange own = loaded.slice(c * perColumn, perColumn);
        SmallVector<Value, 4> tokenWords;
        for (unsigned w = 0; w < rowWords; ++w)
          tokenWords.push_back(rowBytes < 4 ? kb.shrU(own[w], shift) : own[w]);
        words.push_back(tokenWords);
        AffineTerms terms = quantizer.affine(
            quantizer.paramFromBits(own[rowWords]),
            hasZeros ? quantizer.paramFromBits(own[rowWords + 1]) : kb.f32(0));
        Value slope = terms.slope, offset = terms.offset, weight;
        if (partial) {
          Value columnToken = kb.add(token, kb.i32(column));
          Value valid = contains(range, columnToken);
          Value local = kb.select(valid, kb.sub(columnToken, splitRange.begin),
                                  kb.i32(0));
          weight = kb.loadF32(
              scores, kb.add(kb.mul(headOfB, kb.i32(splitTokens)), local));
          slope = kb.select(valid, slope, kb.f32(0));
          offset = kb.select(valid, offset, kb.f32(0));
          weight = kb.select(valid, weight, kb.f32(0));
        } else {
          weight = loadF32At(kb, weightRow, column);
        }
        slopes.push_back(slope);
        offsets.push_back(offset);
        weights.push_back(weight);
      }
      Value b[2] = {packHalves(kb, weights[0], weights[1]),
                    packHalves(kb, weights[2], weights[3])};
      // The slopes of pairs (2t, 2t + 1) and (2t + 8, 2t + 9) divided by
      // the power 2^(b p) of each position p (exact, or subnormal: an
      // absolute error below 2^-24).
      SmallVector<Value> slope[2];
      for (unsigned pair = 0; pair < 2; ++pair) {
        Value pairSlope = halvesOf(
            kb, packHalves(kb, slopes[2 * pair], slopes[2 * pair + 1]));
        for (unsigned pos = 0; pos < perByte; ++pos)
          slope[pair].push_back(
              pos == 0 ? pairSlope
                       : kb.fmul(pairSlope,
                                 splatHalves(
                                     kb, std::ldexp(1.0, -int(bits * pos)))));
      }
      // Byte `index` of the thread's codes of a pair's two tokens, in the
      // low byte of each half.
      SmallVector<Value> bytes[2];
      for (unsigned pair = 0; pair < 2; ++pair)
        for (unsigned index = 0; index < rowBytes; ++index) {
          unsigned inWord = index % 4;
          bytes[pair].push_back(unit.permuteBytes(
              kb, words[2 * pair][index / 4], words[2 * pair + 1][index / 4],
              kb.i32(inWord | (4 + inWord) << 8)));
        }
      auto fragment = [&](unsigned pair, unsigned index, unsigned pos) {
        uint32_t mask = ((1u << bits) - 1) << (bits * pos);
        Value codes = codeHalves(kb, unit, bytes[pair][index],
                                 kb.i32(int32_t(mask | mask << 16)));
        return wordOf(kb, kb.fmul(codes, slope[pair][pos]));
      };
      SmallVector<Value> next;
      for (unsigned i = 0; i < tiles; ++i) {
        unsigned pos = i % perByte, index = 2 * (i / perByte);
        Value a[4] = {fragment(0, index, pos), fragment(0, index + 1, pos),
                      fragment(1, index, pos), fragment(1, index + 1, pos)};
        llvm::append_range(
            next, unit.multiplyAccumulate(kb, a, b, acc.slice(4 * i, 4)));
      }
      Value zero = kb.i32(0);
      Value a[4] = {packHalves(kb, offsets[0], offsets[1]), zero,
                    packHalves(kb, offsets[2], offsets[3]), zero};
      llvm::append_range(
          next, unit.multiplyAccumulate(kb, a, b, acc.slice(4 * tiles, 4)));
      return next;
    };
    // Rows g and g + 8 of tile i are the channels of bytes 2(i / P) and
    // 2(i / P) + 1 at position i % P; columns 2t and 2t + 1 are heads.
    Value rowChannel0 = kb.mul(g, kb.i32(rowChannels));
    auto storeShare = [&](ArrayRef<Value> sums) {
      storeMatrixShare(thread, rowChannel0, rowChannels,
                       [&](unsigned channel, unsigned column) {
                         unsigned pos = channel % perByte;
                         unsigned index = channel / perByte;
                         unsigned i = index / 2 * perByte + pos;
                         return kb.fadd(sums[4 * i + 2 * (index % 2) + column],
                                        sums[4 * tiles + column]);
                       });
    };
    SmallVector<Type> types((tiles + 1) * 4, kb.builder().getF32Type());
    SmallVector<Value> zeros((tiles + 1) * 4, kb.f32(0));
    auto stepStart = [&](Value step) {
      return kb.add(first, kb.mul(step, kb.i32(kStepTokens)));
    };
    sumWarpSharePipelined(
        kb, thread, steps, zeros,
        [&](Value step) { return loadStep(stepStart(step)); },
        [&](Value step, ValueRange loaded,
            ValueRange acc) -> SmallVector<Value> {
          Value q0 = stepStart(step);
          Value inside = covers(range, kb.add(q0, sink), kStepTokens);
          return kb.ifThenElse(
              inside, types, [&] { return emitStep(q0, loaded, acc, false); },
              [&] { return emitStep(q0, loaded, acc, true); });
        },
        storeShare);
  });
  addMatrixShares();
}

//===----------------------------------------------------------------------===//
// span = tokens keys
//===----------------------------------------------------------------------===//

void AttendEmitter::storeSplitHalves(Value values, Value buffer, Value index) {
  // Per 4 values (a 16-byte slot): f16 pairs of the first two and the last
  // two, then the same of what rounding left of each. The residual is an
  // exact f32 subtraction, kept apart from the product before it.
  OpBuilder &b = kb.builder();
  Location loc = kb.getLoc();
  unsigned count = cast<VectorType>(values.getType()).getNumElements();
  assert(count % 4 == 0 && "whole slots of 4 values");
  auto halves = VectorType::get({count}, b.getF16Type());
  auto words = VectorType::get({count / 2}, b.getI32Type());
  Value high = arith::TruncFOp::create(b, loc, halves, values);
  bool reassociate = kb.getReassociate();
  kb.setReassociate(false);
  Value rest =
      kb.fsub(values, arith::ExtFOp::create(b, loc, values.getType(), high));
  kb.setReassociate(reassociate);
  Value low = arith::TruncFOp::create(b, loc, halves, rest);
  Value highWords = LLVM::BitcastOp::create(b, loc, words, high);
  Value lowWords = LLVM::BitcastOp::create(b, loc, words, low);
  for (unsigned slot = 0; slot < count; slot += 4) {
    SmallVector<int64_t> mask = {slot / 2, slot / 2 + 1, count / 2 + slot / 2,
                                 count / 2 + slot / 2 + 1};
    Value packed = vector::ShuffleOp::create(b, loc, highWords, lowWords, mask);
    kb.store(packed, buffer,
             kb.mul(kb.toI64(kb.add(index, kb.i32(slot))), kb.i64(4)), 16);
  }
}

namespace {
/// B as split halves: the f16x2 words of the rounding and of the residual.
struct SplitB {
  Value high[2], low[2];
};
} // namespace

/// The 16-byte slot of split halves (storeSplitHalves) at `byteOffset`
/// from `row`.
static SplitB loadSplitB(KernelBuilder &kb, Value row, int64_t byteOffset) {
  Value slot = kb.load(VectorType::get({4}, kb.builder().getI32Type()), row,
                       kb.i64(byteOffset), 16);
  return {{laneOf(kb, slot, 0), laneOf(kb, slot, 1)},
          {laneOf(kb, slot, 2), laneOf(kb, slot, 3)}};
}

/// acc + A B with B in split halves: two products, the rounding first.
static SmallVector<Value, 4> multiplySplit(KernelBuilder &kb, MatrixUnit &unit,
                                           ValueRange a, const SplitB &b,
                                           ValueRange acc) {
  SmallVector<Value, 4> rounded = unit.multiplyAccumulate(kb, a, b.high, acc);
  return unit.multiplyAccumulate(kb, a, b.low, rounded);
}

void AttendEmitter::scoreTokenBlocksOnMatrix(Range range) {
  // Scores of a block's tokens: K (tokens x channels) times the block's
  // folded queries Q' (channels x heads), whose slopes make A the bare
  // codes. Q' is two f16 matrices, its rounding and the residual
  // (storeSplitHalves), so the products keep f32's precision: Q' in one
  // f16 moved scores by up to 2^-12 of their terms, over the attention
  // tolerance. Thread (g, t) takes channels 4t .. 4t + 3 of each 16-channel
  // step (k-columns 2t, 2t + 1, 2t + 8, 2t + 9), whose code words are
  // consecutive (128-bit loads), and the tokens of rows g and g + 8 of each
  // 16-token tile from one byte of each word: byte g / (P / 2), positions
  // g % (P / 2) and g % (P / 2) + P / 2 (P = 8 / b). The codes arrive as
  // 2^(b p) c; each row's sums are divided by its power. The block's bias
  // (the offsets' dot product) is added as the scores are stored.
  const SliceLayout &keys = slice(true);
  QuantAttr quant = keys.quant;
  KernelTarget &target = kb.getTarget();
  MatrixUnit &unit = *target.getMatrixUnit();
  unsigned bits = quant.getBits(), group = quant.getGroup();
  unsigned perByte = 8 / bits, half = perByte / 2;
  unsigned tiles = group / MatrixUnit::kM, wordsPerGroup = keys.WordsPerGroup;
  unsigned warps = getWarps(target);
  Quantizer quantizer(kb, quant);
  TokenBlocks blocks = getTokenBlocks(range, /*isKeys=*/true);
  foldBlockQueries(blocks, quantizer);

  forEachFragmentThread(kb, heads, [&](const FragmentThread &thread) {
    Value warp = thread.warp, g = thread.g, t = thread.t;
    Value headOfB = thread.headOfB;
    Value byte = kb.divU(g, kb.i32(half));
    // Row g + 8h: position g % (P / 2) + h P / 2 of the byte, the token
    // h P / 2 after row g's.
    Value pos0 = kb.remU(g, kb.i32(half));
    Value rowToken = kb.add(kb.mul(byte, kb.i32(perByte)), pos0);
    Value masks[2], unscale[2];
    for (unsigned h = 0; h < 2; ++h) {
      Value shift = kb.mul(kb.add(pos0, kb.i32(h * half)), kb.i32(bits));
      Value mask = kb.shl(kb.i32((1u << bits) - 1), shift);
      masks[h] = kb.bitOr(mask, kb.shl(mask, kb.i32(16)));
      // 2^-(b p) as the bits of an f32.
      unscale[h] = kb.bitcast(kb.builder().getF32Type(),
                              kb.shl(kb.sub(kb.i32(127), shift), kb.i32(23)));
    }
    auto scoreBlock = [&](Value b) {
      Value first = kb.mul(kb.add(blocks.first, b), kb.i32(group));
      SliceAccess access = getBlockAccess(/*isKeys=*/true, first);
      Value n0 = kb.add(kb.mul(getPageBlock(first, group), kb.i32(dim)),
                        kb.mul(t, kb.i32(4)));
      Value queryRow = f32Row(
          kb, foldedQueries,
          kb.add(kb.mul(kb.add(kb.mul(b, kb.i32(heads)), headOfB), kb.i32(dim)),
                 kb.mul(t, kb.i32(4))));
      // The steps are unrolled: their loads are constant offsets from the
      // block's first code word and folded query of the thread.
      Value codeRow = kb.gep(
          access.getCodesBase(),
          kb.mul(kb.toI64(kb.mul(n0, kb.i32(wordsPerGroup))), kb.i64(4)));
      SmallVector<Value> sums(tiles * 4, kb.f32(0));
      for (unsigned c0 = 0; c0 < dim; c0 += MatrixUnit::kK) {
        // Channels c0 + 4t .. + 3: their code words, and their folded
        // queries as B (high halves and residuals).
        SmallVector<Value> words;
        for (unsigned w = 0; w < 4 * wordsPerGroup; w += 4)
          llvm::append_range(
              words, kb.loadWords4(
                         codeRow, kb.i64(4 * int64_t(c0 * wordsPerGroup + w))));
        SplitB q = loadSplitB(kb, queryRow, 4 * int64_t(c0));
        for (unsigned tile = 0; tile < tiles; ++tile) {
          unsigned bit = tile * MatrixUnit::kM * bits;
          unsigned word = bit / 32, byte0 = bit % 32 / 8;
          Value selector =
              kb.add(kb.add(byte, kb.i32(byte0)),
                     kb.shl(kb.add(byte, kb.i32(4 + byte0)), kb.i32(8)));
          auto channelPair = [&](unsigned c) {
            return unit.permuteBytes(kb, words[c * wordsPerGroup + word],
                                     words[(c + 1) * wordsPerGroup + word],
                                     selector);
          };
          auto codes = [&](Value pair, unsigned h) {
            return wordOf(kb, codeHalves(kb, unit, pair, masks[h]));
          };
          Value low = channelPair(0), high = channelPair(2);
          Value a[4] = {codes(low, 0), codes(low, 1), codes(high, 0),
                        codes(high, 1)};
          SmallVector<Value, 4> exact = multiplySplit(
              kb, unit, a, q, ArrayRef<Value>(sums).slice(4 * tile, 4));
          std::copy(exact.begin(), exact.end(), sums.begin() + 4 * tile);
        }
      }
      // C's rows g and g + 8 are tokens, its columns 2t and 2t + 1 heads.
      // A block inside the range (warp-uniform) stores every score at
      // constant offsets from one address; one straddling it checks each.
      Value blockStart = kb.add(regions[0].sink, first);
      Value inside = covers(range, blockStart, group);
      for (unsigned column = 0; column < 2; ++column) {
        Value r = headOfC(kb, t, column);
        kb.ifThen(kb.ult(r, kb.i32(heads)), [&] {
          Value bias =
              kb.loadF32(blockBiases, kb.add(kb.mul(b, kb.i32(heads)), r));
          auto scoreAt = [&](unsigned tile, unsigned h) {
            return kb.fadd(kb.fmul(sums[4 * tile + 2 * h + column], unscale[h]),
                           bias);
          };
          Value row0 =
              kb.add(kb.mul(r, kb.i32(splitTokens)),
                     kb.sub(kb.add(blockStart, rowToken), splitRange.begin));
          kb.ifThenElse(
              inside, {},
              [&]() -> SmallVector<Value> {
                Value row = f32Row(kb, scores, row0);
                for (unsigned tile = 0; tile < tiles; ++tile)
                  for (unsigned h = 0; h < 2; ++h)
                    kb.store(
                        scoreAt(tile, h), row,
                        kb.i64(4 * int64_t(tile * MatrixUnit::kM + h * half)),
                        4);
                return {};
              },
              [&]() -> SmallVector<Value> {
                for (unsigned tile = 0; tile < tiles; ++tile)
                  for (unsigned h = 0; h < 2; ++h) {
                    unsigned offset = tile * MatrixUnit::kM + h * half;
                    Value token =
                        kb.add(kb.add(blockStart, rowToken), kb.i32(offset));
                    Value score = scoreAt(tile, h);
                    kb.ifThen(contains(range, token), [&] {
                      kb.storeF32(score, scores, kb.add(row0, kb.i32(offset)));
                    });
                  }
                return {};
              });
        });
      }
      // Lanes of heads past the tile's skipped the stores.
      unit.syncWarp(kb);
    };
    kb.forLoop(warp, kb.maxS(blocks.count, warp), kb.i32(warps), {},
               [&](Value b, ValueRange) -> SmallVector<Value> {
                 scoreBlock(b);
                 return {};
               });
  });
}

//===----------------------------------------------------------------------===//
// 3-bit codes: a thread's fragments from one 24-bit field
//===----------------------------------------------------------------------===//
//
// 32 codes of 3 bits are 3 words. Thread t of a fragment's group of 4 takes
// codes 8t .. 8t + 7 of them: 24 bits from byte 3t, gathered by one prmt
// from the two words they touch. Its four f16x2 words of two k-steps pair
// codes (j, j + 4), whose bits lie 12 apart: with the field shifted left by
// 4 (j = 0, 1) or right by 2 (j = 2, 3), code j sits at bit 4 or 7 and code
// j + 4 at bit 16 or 19, so one lop3 masks both and ORs in the exponent of
// 1024, and one fma scales each half by its 2^-p and subtracts 1024 2^-p:
// the exact code. The k-columns follow the pairs (k-step s holds codes
// 2s, 2s + 4 in columns 2t, 2t + 1 and 2s + 1, 2s + 5 in 2t + 8, 2t + 9),
// and B is stored in that order (kFieldOrder).

namespace {
/// One f16x2 word of a thread's field: shift (left if positive), mask, and
/// the fma taking each half from 1024 + 2^p c to c.
struct FieldWord {
  int shift;
  uint32_t mask;
  double scaleLo, scaleHi;
};
} // namespace

/// Words of k-steps 0 and 1: codes (0, 4), (1, 5), (2, 6), (3, 7).
static const FieldWord kFieldWords[4] = {{4, 0x00070070, 1.0 / 16, 1.0},
                                         {4, 0x00380380, 1.0 / 128, 1.0 / 8},
                                         {-2, 0x00070070, 1.0 / 16, 1.0},
                                         {-2, 0x00380380, 1.0 / 128, 1.0 / 8}};
/// The field's codes in k-column order: B's element order.
static const int64_t kFieldOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

/// The four A words (k-steps 0 and 1) of a thread's 24-bit field.
static SmallVector<Value, 4> fieldWords(KernelBuilder &kb, MatrixUnit &unit,
                                        Value field) {
  SmallVector<Value, 4> words;
  for (const FieldWord &w : kFieldWords) {
    Value shifted = w.shift > 0 ? kb.shl(field, kb.i32(w.shift))
                                : kb.shrU(field, kb.i32(-w.shift));
    Value biased = biasedHalves(kb, unit, shifted, kb.i32(int32_t(w.mask)));
    Value code = LLVM::FMAOp::create(
        kb.builder(), kb.getLoc(), biased,
        halvesConstant(kb, w.scaleLo, w.scaleHi),
        halvesConstant(kb, -1024 * w.scaleLo, -1024 * w.scaleHi));
    words.push_back(wordOf(kb, code));
  }
  return words;
}

/// fieldWords of the field at words `word` and `word + 1` of `row`, bytes
/// `selector` of them.
static SmallVector<Value, 4> loadFieldWords(KernelBuilder &kb, MatrixUnit &unit,
                                            Value row, int64_t word,
                                            Value selector) {
  auto load = [&](int64_t w) {
    return kb.load(kb.builder().getI32Type(), row, kb.i64(4 * (word + w)), 4,
                   /*invariant=*/true);
  };
  return fieldWords(kb, unit,
                    unit.permuteBytes(kb, load(0), load(1), selector));
}

namespace {
/// Where thread t's field lies in each 3-word chunk: words `word0` and
/// `word0 + 1` of it, bytes `selector` of that pair (prmt).
struct FieldPlace {
  Value word0, selector;
};
} // namespace

static FieldPlace getFieldPlace(KernelBuilder &kb, Value t) {
  // Bytes 3t .. 3t + 2 of the chunk: in words 0-1 for t < 2, else 1-2.
  Value upper = kb.ult(kb.i32(1), t);
  Value word0 = kb.select(upper, kb.i32(1), kb.i32(0));
  Value first = kb.sub(kb.mul(t, kb.i32(3)), kb.mul(word0, kb.i32(4)));
  Value selector =
      kb.add(kb.add(first, kb.shl(kb.add(first, kb.i32(1)), kb.i32(4))),
             kb.shl(kb.add(first, kb.i32(2)), kb.i32(8)));
  return {word0, selector};
}

/// Stores the `count` f32 values of `from`, each 8 in kFieldOrder, as
/// split halves at `to` (the same indices).
void AttendEmitter::storeFieldOrdered(Value from, Value to, unsigned count) {
  auto octet = VectorType::get({8}, kb.builder().getF32Type());
  kb.getTarget().parallelFor(kb, kb.i32(count / 8), [&](Value i) {
    Value first = kb.mul(i, kb.i32(8));
    Value values = kb.load(octet, f32Row(kb, from, first), kb.i64(0), 16);
    storeSplitHalves(kb.shuffle(values, kFieldOrder), to, first);
  });
}

//===----------------------------------------------------------------------===//
// span = channels keys of 3 bits
//===----------------------------------------------------------------------===//

void AttendEmitter::scoreChannelGroupsOnMatrix(Range range) {
  // A 16-token tile's scores, group by group: the group's products of the
  // bare codes (rows: tokens) with the query (split halves in kFieldOrder),
  // scaled by each token's slope, plus its offset times the query's group
  // sum. Tokens outside the range compute rows that are not stored.
  const SliceLayout &keys = slice(true);
  QuantAttr quant = keys.quant;
  KernelTarget &target = kb.getTarget();
  MatrixUnit &unit = *target.getMatrixUnit();
  unsigned group = quant.getGroup(), groups = keys.GroupsPerToken;
  unsigned tokenBytes = groups * keys.WordsPerGroup * 4;
  unsigned warps = getWarps(target);
  Quantizer quantizer(kb, quant);
  storeFieldOrdered(normQueries, matrixQueries, heads * dim);
  Value sink = regions[0].sink;
  Value first = kb.mul(kb.divU(kb.sub(range.begin, sink), kb.i32(kTileTokens)),
                       kb.i32(kTileTokens));
  Value last = kb.maxS(kb.sub(range.end, sink), first);
  Value tiles = kb.divU(kb.add(kb.sub(last, first), kb.i32(kTileTokens - 1)),
                        kb.i32(kTileTokens));

  forEachFragmentThread(kb, heads, [&](const FragmentThread &thread) {
    Value g = thread.g, t = thread.t;
    FieldPlace place = getFieldPlace(kb, t);
    // The query's group sums of the thread's two columns (heads).
    SmallVector<Value> groupSum[2];
    for (unsigned column = 0; column < 2; ++column) {
      Value h = kb.minU(headOfC(kb, t, column), kb.i32(heads - 1));
      for (unsigned gi = 0; gi < groups; ++gi)
        groupSum[column].push_back(kb.loadF32(
            groupSums, kb.add(kb.mul(h, kb.i32(groups)), kb.i32(gi))));
    }
    Value queryRow = f32Row(
        kb, matrixQueries,
        kb.add(kb.mul(thread.headOfB, kb.i32(dim)), kb.mul(t, kb.i32(8))));
    auto scoreTile = [&](Value tile) {
      Value q0 = kb.add(first, kb.mul(tile, kb.i32(kTileTokens)));
      SliceAccess access(kb, tensor(true), keys, layout.pageTokens,
                         args.pages[0], tableRow(true), q0, head);
      Value pageToken = kb.add(kb.remU(q0, kb.i32(layout.pageTokens)), g);
      // Rows g and g + 8: their code rows and parameters.
      Value codeRow[2], slope[2], offset[2];
      for (unsigned h = 0; h < 2; ++h) {
        Value row = kb.add(pageToken, kb.i32(8 * h));
        codeRow[h] = kb.gep(access.getCodesBase(),
                            kb.toI64(kb.add(kb.mul(row, kb.i32(tokenBytes)),
                                            kb.mul(place.word0, kb.i32(4)))));
        Value n = kb.mul(row, kb.i32(groups));
        AffineTerms terms =
            quantizer.affine(access.loadScales(quantizer, n, groups, true),
                             access.loadZeros(quantizer, n, groups, true));
        slope[h] = terms.slope;
        offset[h] = terms.offset;
      }
      SmallVector<Value> scoresOf(4, kb.f32(0));
      Value zero = kb.f32(0);
      for (unsigned gi = 0; gi < groups; ++gi) {
        SmallVector<Value> sums(4, zero);
        for (unsigned c = 0; c < group / 32; ++c) {
          unsigned chunk = gi * group / 32 + c;
          SmallVector<Value, 4> words[2];
          for (unsigned h = 0; h < 2; ++h)
            words[h] =
                loadFieldWords(kb, unit, codeRow[h], 3 * chunk, place.selector);
          for (unsigned s = 0; s < 2; ++s) {
            Value a[4] = {words[0][2 * s], words[1][2 * s], words[0][2 * s + 1],
                          words[1][2 * s + 1]};
            SplitB q =
                loadSplitB(kb, queryRow, 4 * int64_t(32 * chunk + 4 * s));
            SmallVector<Value, 4> exact = multiplySplit(kb, unit, a, q, sums);
            sums.assign(exact.begin(), exact.end());
          }
        }
        // C element e: row g + 8 (e / 2), column 2t + e % 2.
        for (unsigned e = 0; e < 4; ++e) {
          unsigned h = e / 2, column = e % 2;
          Value bias = kb.fmul(laneOf(kb, offset[h], gi), groupSum[column][gi]);
          scoresOf[e] = kb.fadd(
              scoresOf[e],
              kb.fadd(kb.fmul(laneOf(kb, slope[h], gi), sums[e]), bias));
        }
      }
      Value token = kb.add(kb.add(q0, g), sink);
      Value inside = covers(range, kb.add(q0, sink), kTileTokens);
      for (unsigned column = 0; column < 2; ++column) {
        Value r = headOfC(kb, t, column);
        kb.ifThen(kb.ult(r, kb.i32(heads)), [&] {
          Value row0 = kb.add(kb.mul(r, kb.i32(splitTokens)),
                              kb.sub(token, splitRange.begin));
          for (unsigned h = 0; h < 2; ++h) {
            Value score = scoresOf[2 * h + column];
            Value at = kb.add(row0, kb.i32(8 * h));
            kb.ifThenElse(
                inside, {},
                [&]() -> SmallVector<Value> {
                  kb.storeF32(score, scores, at);
                  return {};
                },
                [&]() -> SmallVector<Value> {
                  kb.ifThen(contains(range, kb.add(token, kb.i32(8 * h))),
                            [&] { kb.storeF32(score, scores, at); });
                  return {};
                });
          }
        });
      }
      // Lanes of heads past the tile's skipped the stores.
      unit.syncWarp(kb);
    };
    kb.forLoop(thread.warp, kb.maxS(tiles, thread.warp), kb.i32(warps), {},
               [&](Value tile, ValueRange) -> SmallVector<Value> {
                 scoreTile(tile);
                 return {};
               });
  });
}

//===----------------------------------------------------------------------===//
// span = tokens values of 3 bits
//===----------------------------------------------------------------------===//

void AttendEmitter::loadBlockWeightsOnMatrix(Range range,
                                             const TokenBlocks &blocks) {
  // Per block and head: the weights, 0 outside `range`, rounded to f16 in
  // field order (8 tokens per task), and the sum of the rounded weights,
  // so that the offsets weigh exactly what the products did.
  unsigned group = slice(false).quant.getGroup(), workers = group / 8;
  Type f16 = kb.builder().getF16Type(), f32 = kb.builder().getF32Type();
  Value tasks = kb.mul(blocks.count, kb.i32(heads));
  forEachWorker(tasks, workers, [&](Value task, Value worker) {
    Value valid = kb.ult(task, tasks);
    Value b = kb.divU(task, kb.i32(heads)), r = kb.remU(task, kb.i32(heads));
    Value first = kb.add(
        kb.add(regions[1].sink, kb.mul(kb.add(blocks.first, b), kb.i32(group))),
        kb.mul(worker, kb.i32(8)));
    SmallVector<Value> weights;
    for (unsigned k = 0; k < 8; ++k) {
      Value t = kb.add(first, kb.i32(k));
      Value inRange = kb.bitAnd(valid, contains(range, t));
      Value local = kb.select(inRange, kb.sub(t, splitRange.begin), kb.i32(0));
      Value p =
          kb.loadF32(scores, kb.add(kb.mul(r, kb.i32(splitTokens)), local));
      weights.push_back(kb.select(inRange, p, kb.f32(0)));
    }
    OpBuilder &builder = kb.builder();
    Value ordered = kb.shuffle(
        vector::FromElementsOp::create(builder, kb.getLoc(),
                                       VectorType::get({8}, f32), weights),
        kFieldOrder);
    Value halves = arith::TruncFOp::create(builder, kb.getLoc(),
                                           VectorType::get({8}, f16), ordered);
    Value sum = kb.reduceAdd(arith::ExtFOp::create(
        builder, kb.getLoc(), VectorType::get({8}, f32), halves));
    sum = kb.getTarget().sumAcrossWorkers(kb, {sum}, workers)[0];
    kb.ifThen(valid, [&] {
      kb.store(halves, matrixWeights,
               kb.mul(kb.toI64(kb.add(kb.mul(task, kb.i32(group)),
                                      kb.mul(worker, kb.i32(8)))),
                      kb.i64(2)),
               16);
      kb.ifThen(kb.eq(worker, kb.i32(0)),
                [&] { kb.storeF32(sum, blockWeightSums, task); });
    });
  });
}

void AttendEmitter::sumTokenBlockValuesOnMatrix(Range range) {
  // A block adds, per 16-channel tile, V^T (channels x the block's tokens,
  // bare codes) times its weights (tokens x heads, f16 in field order),
  // scaled by each channel's slope, plus its offset times the heads' weight
  // sums. Row g + 8h of tile i is channel g D / 8 + 2i + h: a thread's
  // channels are consecutive, so are their parameters. Warps take every
  // warps-th block and add their sums through shared memory.
  const SliceLayout &values = slice(false);
  QuantAttr quant = values.quant;
  KernelTarget &target = kb.getTarget();
  MatrixUnit &unit = *target.getMatrixUnit();
  unsigned group = quant.getGroup(), wordsPerGroup = values.WordsPerGroup;
  unsigned rowChannels = dim / 8, tiles = dim / MatrixUnit::kM;
  Quantizer quantizer(kb, quant);
  TokenBlocks blocks = getTokenBlocks(range, /*isKeys=*/false);
  loadBlockWeightsOnMatrix(range, blocks);
  auto quad = VectorType::get({4}, kb.builder().getI32Type());

  forEachFragmentThread(kb, heads, [&](const FragmentThread &thread) {
    Value g = thread.g, t = thread.t;
    FieldPlace place = getFieldPlace(kb, t);
    Value rowChannel0 = kb.mul(g, kb.i32(rowChannels));
    auto addBlock = [&](Value b, ValueRange acc) -> SmallVector<Value> {
      Value first = kb.mul(kb.add(blocks.first, b), kb.i32(group));
      SliceAccess access = getBlockAccess(/*isKeys=*/false, first);
      Value n0 =
          kb.add(kb.mul(getPageBlock(first, group), kb.i32(dim)), rowChannel0);
      AffineTerms terms =
          quantizer.affine(access.loadScales(quantizer, n0, rowChannels, true),
                           access.loadZeros(quantizer, n0, rowChannels, true));
      Value codeRow =
          kb.gep(access.getCodesBase(),
                 kb.mul(kb.toI64(kb.add(kb.mul(n0, kb.i32(wordsPerGroup)),
                                        place.word0)),
                        kb.i64(4)));
      Value weightRow =
          kb.gep(matrixWeights,
                 kb.mul(kb.toI64(kb.add(kb.mul(kb.add(kb.mul(b, kb.i32(heads)),
                                                      thread.headOfB),
                                               kb.i32(group)),
                                        kb.mul(t, kb.i32(8)))),
                        kb.i64(2)));
      SmallVector<Value> weightSum;
      for (unsigned column = 0; column < 2; ++column) {
        Value h = kb.minU(headOfC(kb, t, column), kb.i32(heads - 1));
        weightSum.push_back(
            kb.loadF32(blockWeightSums, kb.add(kb.mul(b, kb.i32(heads)), h)));
      }
      SmallVector<Value> bWords[2];
      for (unsigned chunk = 0; chunk < group / 32; ++chunk) {
        Value w = kb.load(quad, weightRow, kb.i64(64 * int64_t(chunk)), 16);
        for (unsigned s = 0; s < 2; ++s)
          for (unsigned i = 0; i < 2; ++i)
            bWords[s].push_back(laneOf(kb, w, 2 * s + i));
      }
      SmallVector<Value> next;
      for (unsigned i = 0; i < tiles; ++i) {
        SmallVector<Value> sums(4, kb.f32(0));
        for (unsigned chunk = 0; chunk < group / 32; ++chunk) {
          SmallVector<Value, 4> words[2];
          for (unsigned h = 0; h < 2; ++h)
            words[h] = loadFieldWords(
                kb, unit, codeRow,
                int64_t(2 * i + h) * wordsPerGroup + 3 * chunk, place.selector);
          for (unsigned s = 0; s < 2; ++s) {
            Value a[4] = {words[0][2 * s], words[1][2 * s], words[0][2 * s + 1],
                          words[1][2 * s + 1]};
            Value bFrag[2] = {bWords[s][2 * chunk], bWords[s][2 * chunk + 1]};
            SmallVector<Value, 4> product =
                unit.multiplyAccumulate(kb, a, bFrag, sums);
            sums.assign(product.begin(), product.end());
          }
        }
        // C element e: row g + 8 (e / 2) (channel 2i + e / 2), column
        // 2t + e % 2.
        for (unsigned e = 0; e < 4; ++e) {
          unsigned channel = 2 * i + e / 2;
          Value bias =
              kb.fmul(laneOf(kb, terms.offset, channel), weightSum[e % 2]);
          next.push_back(kb.fadd(
              acc[4 * i + e],
              kb.fadd(kb.fmul(laneOf(kb, terms.slope, channel), sums[e]),
                      bias)));
        }
      }
      return next;
    };
    auto storeShare = [&](ArrayRef<Value> sums) {
      storeMatrixShare(
          thread, rowChannel0, rowChannels,
          [&](unsigned channel, unsigned column) {
            return sums[4 * (channel / 2) + 2 * (channel % 2) + column];
          });
    };
    SmallVector<Value> zeros(tiles * 4, kb.f32(0));
    sumWarpShare(kb, thread, blocks.count, zeros, addBlock, storeShare);
  });
  addMatrixShares();
}

//===----------------------------------------------------------------------===//
// The split's quantized pages, asked for on entry
//===----------------------------------------------------------------------===//
//
// A matrix form's warp loads a step (a key block) and waits for it before
// the next, and at ~16 warps an SM those waits are DRAM's latency, one per
// step (docs/Performance.md, "GPU: measured on an H200"). Where the target
// prefetches splits, the block first asks for every 64-byte line of the
// codes and parameters its split's quantized tokens occupy, so that the
// steps' own loads find them in the L2. A page's codes, scales and
// zero-points are each ordered by group, and a page's groups by token (a
// span=tokens group by its block), so tokens [t0, t1) of a page are groups
// [t0 G / P, t1 G / P) of each (G groups a page, P tokens).

bool AttendEmitter::readsOnMatrix(bool isKeys) {
  return isKeys ? scoresKeysOnMatrix() || scoresChannelKeysOnMatrix()
                : sumsValuesOnMatrix() || sumsBlockValuesOnMatrix();
}

/// What a block asks for of one tensor: the lines of its pages from
/// firstPage that meet quantized positions [first, end), `count` in all.
struct AttendEmitter::SplitLines {
  bool isKeys;
  Value first, end, firstPage, count;
  /// Lines a page: its arrays', one after another.
  unsigned pageLines = 0;
  struct Array {
    uint64_t groupBytes;
    int64_t offset;
    unsigned firstLine;
  };
  SmallVector<Array, 3> arrays;
};

void AttendEmitter::prefetchSplit() {
  if (!kb.getTarget().prefetchesSplits())
    return;
  SmallVector<SplitLines, 2> tensors;
  for (bool isKeys : {true, false})
    if (readsOnMatrix(isKeys))
      tensors.push_back(getSplitLines(isKeys));
  if (tensors.empty())
    return;
  // Only where the launch asks (prefetchSplit: the grid runs in several
  // waves, so a block's requests overlap other blocks' work); in one wave
  // they only delay the first phase's own loads. One loop over both
  // tensors' lines, which no thread waits for.
  Value count = tensors[0].count;
  if (tensors.size() == 2)
    count = kb.add(count, tensors[1].count);
  count = kb.select(kb.eq(args.prefetchSplit, kb.i32(0)), kb.i32(0), count);
  kb.getTarget().parallelForNoWait(kb, count, [&](Value i) {
    Value index = i;
    for (const SplitLines &lines : tensors) {
      Value in = kb.ult(index, lines.count);
      kb.ifThen(in, [&] { prefetchSplitLine(lines, index); });
      index = kb.sub(index, lines.count);
    }
  });
}

AttendEmitter::SplitLines AttendEmitter::getSplitLines(bool isKeys) {
  const SliceLayout &s = slice(isKeys);
  const Regions &region = regions[isKeys ? 0 : 1];
  unsigned pageTokens = layout.pageTokens;
  SplitLines lines;
  lines.isKeys = isKeys;
  // Quantized positions, out to whole blocks of span=tokens.
  unsigned block = s.quant.getSpan() == Span::Tokens ? s.quant.getGroup() : 1;
  Range range =
      clip(splitRange, region.sink, kb.add(region.sink, region.quantized));
  lines.first = kb.mul(kb.divU(kb.sub(range.begin, region.sink), kb.i32(block)),
                       kb.i32(block));
  lines.end =
      kb.mul(kb.divU(kb.add(kb.sub(range.end, region.sink), kb.i32(block - 1)),
                     kb.i32(block)),
             kb.i32(block));
  lines.firstPage = kb.divU(lines.first, kb.i32(pageTokens));
  Value endPage = kb.maxS(
      kb.divU(kb.add(lines.end, kb.i32(pageTokens - 1)), kb.i32(pageTokens)),
      lines.firstPage);
  auto addArray = [&](uint64_t groupBytes, int64_t offset) {
    lines.arrays.push_back({groupBytes, offset, lines.pageLines});
    lines.pageLines += llvm::divideCeil(s.GroupsPerPage * groupBytes, 64);
  };
  addArray(uint64_t(s.WordsPerGroup) * 4, 0);
  addArray(s.ParamBytes, s.ScalesOffset);
  if (s.ZerosOffset >= 0)
    addArray(s.ParamBytes, s.ZerosOffset);
  lines.count =
      kb.mul(kb.sub(endPage, lines.firstPage), kb.i32(lines.pageLines));
  return lines;
}

void AttendEmitter::prefetchSplitLine(const SplitLines &lines, Value i) {
  const SliceLayout &s = slice(lines.isKeys);
  unsigned pageTokens = layout.pageTokens;
  Value page = kb.add(lines.firstPage, kb.divU(i, kb.i32(lines.pageLines)));
  Value line = kb.remU(i, kb.i32(lines.pageLines));
  Value pageStart = kb.mul(page, kb.i32(pageTokens));
  Value t0 = kb.sub(kb.maxS(lines.first, pageStart), pageStart);
  Value t1 = kb.sub(kb.minU(lines.end, kb.add(pageStart, kb.i32(pageTokens))),
                    pageStart);
  Value n0 = kb.divU(kb.mul(t0, kb.i32(s.GroupsPerPage)), kb.i32(pageTokens));
  Value n1 = kb.divU(kb.mul(t1, kb.i32(s.GroupsPerPage)), kb.i32(pageTokens));
  SliceAccess access(kb, tensor(lines.isKeys), s, pageTokens,
                     args.pages[lines.isKeys ? 0 : 1], tableRow(lines.isKeys),
                     pageStart, head);
  // The line's array (the last that starts at or before it), its line
  // within that array, holding bytes [64 l, 64 l + 64): wanted where they
  // meet the groups' bytes [n0 B, n1 B).
  const SplitLines::Array &codes = lines.arrays.front();
  Value firstLine = kb.i32(codes.firstLine);
  Value groupBytes = kb.i32(codes.groupBytes);
  Value offset = kb.i64(codes.offset), base = access.getCodesBase();
  for (const SplitLines::Array &array : ArrayRef(lines.arrays).drop_front()) {
    Value before = kb.ult(line, kb.i32(array.firstLine));
    firstLine = kb.select(before, firstLine, kb.i32(array.firstLine));
    groupBytes = kb.select(before, groupBytes, kb.i32(array.groupBytes));
    offset = kb.select(before, offset, kb.i64(array.offset));
    base = kb.select(before, base, access.getBase());
  }
  Value lineStart = kb.mul(kb.sub(line, firstLine), kb.i32(64));
  Value wanted =
      kb.bitAnd(kb.ult(lineStart, kb.mul(n1, groupBytes)),
                kb.ult(kb.mul(n0, groupBytes), kb.add(lineStart, kb.i32(64))));
  kb.ifThen(wanted, [&] {
    kb.getTarget().prefetch(kb, base, kb.add(offset, kb.toI64(lineStart)), 1);
  });
}
