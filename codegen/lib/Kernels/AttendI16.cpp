//===- AttendI16.cpp - attend loops on 16-bit integer pair dots -----------===//
//
// Where the target adds products of 16-bit integers in pairs into 32-bit
// lanes (the target's cpu_dot: `vpdpwssd` on a CPU with AVX-512 VNNI),
// four loops of the attend kernel multiply bare codes by f32 factors rounded
// to i16, so that one instruction per head does what two unpacks and two
// FMAs did (docs/Numerics.md, "Attention on integer dots"):
//   - span=tokens keys: per block and head the folded queries are rounded
//     against their largest magnitude; a lane holds one token's codes of a
//     pair of channels;
//   - span=channels keys: per head the normalised query is rounded once;
//     a vector holds every group of a token, a lane a pair of adjacent
//     channels, so that the group slopes multiply each head's i32 lanes
//     once, after the sums;
//   - span=channels values: per 32-token block, head and group the weights
//     p * slope are rounded against their largest magnitude; a lane holds
//     one channel's codes of a pair of tokens. The i32 sums of a block are
//     exact and go to f32 times the block's scale;
//   - span=tokens values: per block and head the weights p are rounded
//     against their largest; a vector holds half a chunk's channels, a
//     lane one channel's codes of a pair of tokens (two lanes a channel,
//     for two pairs, added after the block), and the block's slopes and
//     offsets apply after the sums.
// A lane's pair of codes is gathered by one byte shuffle, one shift per
// lane or half and one mask (unpackHalves); the shuffle's bytes come from
// at most two registers.
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"

#include "kvq/Codegen/ChannelPairs.h"
#include "kvq/Codegen/CodePacking.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

/// Lane l's codes at bit laneBits[l] of two code streams of `streamBytes`
/// each (`bytes`): the first stream's in its low 16 bits.
static Value unpackPairs(KernelBuilder &kb, Value bytes, unsigned streamBytes,
                         unsigned bits, ArrayRef<unsigned> laneBits) {
  SmallVector<unsigned> halfBits;
  for (unsigned bit : laneBits)
    halfBits.append({bit, streamBytes * 8 + bit});
  return unpackHalves(kb, bytes, bits, halfBits);
}

//===----------------------------------------------------------------------===//
// span = tokens keys
//===----------------------------------------------------------------------===//

void AttendEmitter::roundFoldedQueries(Value b, Value rows,
                                       ArrayRef<Value> maxima) {
  unsigned lanes = kb.getTarget().getVectorLanes();
  for (auto [r, maximum] : llvm::enumerate(maxima)) {
    Value largest = kb.reduceMax(maximum);
    Value toI16 = kb.splat(scaleToI16(kb, largest), lanes);
    kb.storeF32(kb.fmul(largest, kb.f32(1 / kI16Max)), blockQueryScales,
                kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r)));
    Value row = kb.add(rows, kb.i32(r * dim));
    kb.forEach(kb.i32(0), kb.i32(dim / lanes), [&](Value chunk) {
      Value at = kb.add(row, kb.mul(chunk, kb.i32(lanes)));
      Value folded = loadVectorF32(kb, foldedQueries, at, lanes);
      kb.store(roundToI16(kb, folded, toI16), pairQueries,
               kb.mul(kb.toI64(at), kb.i64(2)), 2);
    });
  }
}

SmallVector<Value> AttendEmitter::blockDotsOnI16(SliceAccess &access, Value b,
                                                 Value pageBlock,
                                                 unsigned chunk0,
                                                 unsigned count, Value c0,
                                                 unsigned channels) {
  // Per channel pair: the codes of both channels' streams, each lane a
  // token's pair, dotted with each head's pair of rounded queries by one
  // vpdpwssd.
  KernelTarget &target = kb.getTarget();
  const SliceLayout &keys = slice(true);
  unsigned bits = keys.quant.getBits(), lanes = target.getVectorLanes();
  unsigned streamBytes = keys.WordsPerGroup * 4;
  OpBuilder &builder = kb.builder();
  Type i32 = builder.getI32Type();
  SmallVector<Value> zeros(count * heads, kb.splat(kb.i32(0), lanes));
  SmallVector<Value> sums = kb.forLoop(
      c0, kb.add(c0, kb.i32(channels)), kb.i32(2), zeros,
      [&](Value c, ValueRange acc) -> SmallVector<Value> {
        Value n = kb.add(kb.mul(pageBlock, kb.i32(dim)), c);
        Value bytes = kb.load(
            VectorType::get({2 * streamBytes}, builder.getI8Type()),
            access.getCodesBase(), kb.mul(kb.toI64(n), kb.i64(streamBytes)), 4,
            /*invariant=*/true);
        Value queryRow =
            kb.gep(pairQueries,
                   kb.mul(kb.toI64(kb.add(kb.mul(b, kb.i32(heads * dim)), c)),
                          kb.i64(2)));
        // Each head's pair of queries, for every chunk of tokens.
        SmallVector<Value> queryPairs;
        for (unsigned r = 0; r < heads; ++r)
          queryPairs.push_back(kb.splat(
              kb.load(i32, queryRow, kb.i64(int64_t(r) * dim * 2), 4), lanes));
        SmallVector<Value> next(acc.begin(), acc.end());
        for (unsigned t = 0; t < count; ++t) {
          SmallVector<unsigned> laneBits;
          for (unsigned l = 0; l < lanes; ++l)
            laneBits.push_back(((chunk0 + t) * lanes + l) * bits);
          Value codes = unpackPairs(kb, bytes, streamBytes, bits, laneBits);
          for (unsigned r = 0; r < heads; ++r) {
            Value &sum = next[t * heads + r];
            sum = target.dotI16Pairs(kb, sum, codes, queryPairs[r]);
          }
        }
        return next;
      });
  SmallVector<Value> scales;
  for (unsigned r = 0; r < heads; ++r)
    scales.push_back(
        kb.splat(kb.loadF32(blockQueryScales,
                            kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r))),
                 lanes));
  SmallVector<Value> dots;
  for (unsigned t = 0; t < count; ++t)
    for (unsigned r = 0; r < heads; ++r)
      dots.push_back(kb.fmul(kb.sitofp(sums[t * heads + r]), scales[r]));
  return dots;
}

//===----------------------------------------------------------------------===//
// span = channels keys
//===----------------------------------------------------------------------===//

void AttendEmitter::scoreChannelGroupsOnI16(Range range) {
  // Each head's normalised query is rounded to i16 against its largest
  // magnitude once, in the vectors' channel order. Per token: its codes in
  // one vector, a byte shuffle, shift and mask per vector, one vpdpwssd per
  // head and vector. Then, per chunk of heads, their i32 lanes are summed
  // per head and group (lanes of a group lie `groups` apart), the sums go
  // to f32 times their group's slope and the head's query scale, plus the
  // group's offset times the query's group sum, and the groups are summed.
  const SliceLayout &keys = slice(true);
  KernelTarget &target = kb.getTarget();
  unsigned lanes = target.getVectorLanes(), bits = keys.quant.getBits();
  ChannelPairs pairs(lanes, keys.GroupsPerToken, keys.quant.getGroup());
  unsigned groups = pairs.groups;
  // A token's codes load as one 64-byte vector where the bytes after the
  // last token's exist (its slice's parameters follow the codes), so that
  // LLVM shuffles one register.
  unsigned rowBytes = groups * keys.WordsPerGroup * 4;
  if (!keys.sharesCodes() && keys.SliceBytes - keys.CodesBytes >= 64 - rowBytes)
    rowBytes = 64;
  OpBuilder &b = kb.builder();
  SmallVector<Value> queryPairs, queryScales;
  for (unsigned r = 0; r < heads; ++r) {
    Value row = loadVectorF32(kb, normQueries, kb.i32(r * dim), dim);
    queryPairs.append(pairs.roundQuery(kb, row, queryScales.emplace_back()));
  }
  SmallVector<SmallVector<unsigned>> halfBits;
  for (unsigned v = 0; v < pairs.vectors; ++v)
    halfBits.push_back(pairs.getHalfBits(v, keys.WordsPerGroup, bits));
  SmallVector<Value> headGroupSums;
  for (unsigned r = 0; r < heads; ++r)
    headGroupSums.push_back(groupSumsOf(r, kb.i32(0), groups));
  ChannelPairScores scoring(kb, pairs, queryScales, headGroupSums);
  ArrayRef<ChannelPairScores::HeadChunk> chunks = scoring.getChunks();
  Quantizer quantizer(kb, keys.quant);
  // The token at pageToken: per chunk of heads, a vector whose lane
  // r * run holds head (first + r)'s score.
  auto tokenDots = [&](SliceAccess &access, Value pageToken) {
    Value n0 = kb.mul(pageToken, kb.i32(groups));
    Value bytes = kb.load(
        VectorType::get({rowBytes}, b.getI8Type()), access.getCodesBase(),
        kb.mul(kb.toI64(n0), kb.i64(keys.WordsPerGroup * 4)), 4,
        /*invariant=*/true);
    SmallVector<Value> sums(heads, kb.splat(kb.i32(0), lanes));
    for (unsigned v = 0; v < pairs.vectors; ++v) {
      Value codes = unpackHalves(kb, bytes, bits, halfBits[v]);
      for (unsigned r = 0; r < heads; ++r)
        sums[r] = target.dotI16Pairs(kb, sums[r], codes,
                                     queryPairs[r * pairs.vectors + v]);
    }
    AffineTerms terms =
        quantizer.affine(access.loadScales(quantizer, n0, groups),
                         access.loadZeros(quantizer, n0, groups));
    return scoring.score(kb, sums, terms.slope, terms.offset);
  };
  auto scoreToken = [&](SliceAccess &access, Value pageToken, Value t,
                        ValueRange) -> SmallVector<Value> {
    SmallVector<Value> scores;
    for (auto [chunk, dots] : llvm::zip(chunks, tokenDots(access, pageToken)))
      for (unsigned r = 0; r < chunk.count; ++r)
        scores.push_back(laneOf(kb, dots, r * (lanes / chunk.count)));
    storeScoreValues(t, scores);
    return {};
  };
  // With every head in one chunk, tokens go in batches: their heads' lanes
  // gathered into one row a head (a tree of shuffles, one store a head),
  // where a token alone takes an extract and a store a head.
  std::optional<TokenBatch> batch;
  unsigned batchTokens = std::min(4u, lanes / heads);
  if (chunks.size() == 1 && batchTokens > 1) {
    SmallVector<int64_t> headLanes;
    for (unsigned r = 0; r < heads; ++r)
      headLanes.push_back(r * (lanes / heads));
    batch = {
        batchTokens,
        [&, batchTokens, headLanes](SliceAccess &access, Value pageToken,
                                    Value t, ValueRange) -> SmallVector<Value> {
          SmallVector<Value> dots;
          for (unsigned i = 0; i < batchTokens; ++i)
            dots.push_back(tokenDots(access, kb.add(pageToken, kb.i32(i)))[0]);
          Value all = kb.gatherLanes(dots, headLanes);
          SmallVector<Value> rows;
          for (unsigned r = 0; r < heads; ++r)
            rows.push_back(
                kb.shuffle(all, llvm::to_vector(llvm::seq<int64_t>(
                                    r * batchTokens, (r + 1) * batchTokens))));
          storeScoreValues(t, rows);
          return {};
        }};
  }
  forEachTokenOfThreads(range, scoreToken, batch ? &*batch : nullptr);
}

//===----------------------------------------------------------------------===//
// span = channels values
//===----------------------------------------------------------------------===//

Value AttendEmitter::roundBlockWeights(SliceAccess &access,
                                       Quantizer &quantizer, Value blockStart,
                                       Range tokens, SmallVector<Value> &sums) {
  // Pair j (tokens 2j, 2j + 1 of the block) of head r: its weights p *
  // slope as [group][token of the pair] (pairWeights, f32), their largest
  // magnitude per group, then the same rounded (roundedPairWeights, i16: a
  // group's pair is one i32). Tokens outside `tokens` weigh 0: their p is
  // not read, and their parameters are finite (a row no token has reached
  // is zeros: the runtime clears a page when it takes it). `sums` (per
  // head, [group][token]) gather p * offset.
  const SliceLayout &values = slice(false);
  unsigned groups = values.GroupsPerToken, pairs = kValueBlockTokens / 2;
  unsigned width = 2 * groups;
  OpBuilder &b = kb.builder();
  SmallVector<int64_t> byGroup, pairOfP;
  for (unsigned g = 0; g < groups; ++g)
    for (unsigned s = 0; s < 2; ++s) {
      byGroup.push_back(s * groups + g);
      pairOfP.push_back(s);
    }
  Value pageToken0 = kb.remU(blockStart, kb.i32(layout.pageTokens));
  Value splitBase = kb.sub(regions[1].sink, splitRange.begin);
  SmallVector<Value> init(heads, vectorF32(kb, width, 0));
  init.append(sums.begin(), sums.end());
  SmallVector<Value> loop = kb.forLoop(
      kb.i32(0), kb.i32(pairs), kb.i32(1), init,
      [&](Value j, ValueRange acc) -> SmallVector<Value> {
        Value first = kb.add(blockStart, kb.mul(j, kb.i32(2)));
        Value n =
            kb.mul(kb.add(pageToken0, kb.mul(j, kb.i32(2))), kb.i32(groups));
        AffineTerms terms =
            quantizer.affine(access.loadScales(quantizer, n, width),
                             access.loadZeros(quantizer, n, width));
        Value slope = kb.shuffle(terms.slope, byGroup);
        Value offset = kb.shuffle(terms.offset, byGroup);
        // The pair's tokens inside `tokens`, unsigned t - begin < end -
        // begin per lane.
        Value rel = kb.add(kb.vectorI32({0, 1}),
                           kb.splat(kb.sub(first, tokens.begin), 2));
        Value valid =
            kb.ult(rel, kb.splat(kb.sub(tokens.end, tokens.begin), 2));
        Value index = kb.add(first, splitBase);
        SmallVector<Value> next(acc.begin(), acc.end());
        for (unsigned r = 0; r < heads; ++r) {
          Value at = kb.add(index, kb.i32(r * splitTokens));
          Value p = kb.maskedLoad(VectorType::get({2}, b.getF32Type()), scores,
                                  kb.mul(kb.toI64(at), kb.i64(4)), valid, 4);
          Value pByGroup = kb.shuffle(p, pairOfP);
          Value w = kb.fmul(pByGroup, slope);
          storeVectorF32(kb, w, pairWeights,
                         kb.mul(kb.add(kb.mul(j, kb.i32(heads)), kb.i32(r)),
                                kb.i32(width)));
          next[r] = kb.runningMax(acc[r], kb.fabs(w));
          next[heads + r] = kb.fadd(acc[heads + r], kb.fmul(pByGroup, offset));
        }
        return next;
      });
  std::copy(loop.begin() + heads, loop.end(), sums.begin());
  // Each group's largest in both of its lanes; the block's scales (f32,
  // [head][group][token of a pair], both lanes of a group alike).
  SmallVector<int64_t> swapPairs;
  for (unsigned i = 0; i < width; ++i)
    swapPairs.push_back(i ^ 1);
  SmallVector<Value> toI16;
  for (unsigned r = 0; r < heads; ++r) {
    Value largest = kb.selectMax(loop[r], kb.shuffle(loop[r], swapPairs));
    toI16.push_back(scaleToI16(kb, largest));
    storeVectorF32(kb, kb.fmul(largest, kb.f32Like(largest, 1 / kI16Max)),
                   pairWeightScales, kb.i32(r * width));
  }
  kb.forEach(kb.i32(0), kb.i32(pairs), [&](Value j) {
    for (unsigned r = 0; r < heads; ++r) {
      Value at =
          kb.mul(kb.add(kb.mul(j, kb.i32(heads)), kb.i32(r)), kb.i32(width));
      Value w = loadVectorF32(kb, pairWeights, at, width);
      kb.store(roundToI16(kb, w, toI16[r]), roundedPairWeights,
               kb.mul(kb.toI64(at), kb.i64(2)), 2);
    }
  });
  return pageToken0;
}

void AttendEmitter::sumBlockPassOnI16(SliceAccess &access, Value pageToken0,
                                      const ValuePass &pass) {
  // Per pair of tokens: both tokens' codes of the pass's groups in one
  // vector, a chunk's lanes each a channel's pair, dotted with each head's
  // pair of rounded weights of its group by one vpdpwssd.
  KernelTarget &target = kb.getTarget();
  const SliceLayout &values = slice(false);
  unsigned lanes = target.getVectorLanes(), bits = values.quant.getBits();
  unsigned groups = values.GroupsPerToken, words = values.WordsPerGroup;
  unsigned groupChunks = values.quant.getGroup() / lanes;
  unsigned width = 2 * groups, count = pass.heads, chunks = pass.chunks;
  unsigned g0 = *getConstantIntValue(pass.firstChunk) / groupChunks;
  unsigned passBytes = chunks / groupChunks * words * 4;
  OpBuilder &b = kb.builder();
  Type i32 = b.getI32Type();
  // Both tokens' bytes of the pass load as one 64-byte vector from the
  // first's where they lie within it and the bytes after the page's last
  // pair exist (its slice's parameters follow the codes): LLVM then
  // shuffles one register, not two (no copy for the two-source shuffle).
  unsigned rowBytes = groups * words * 4;
  int64_t overread = int64_t(layout.pageTokens - 2) * rowBytes +
                     g0 * words * 4 + 64 - int64_t(values.CodesBytes);
  bool oneLoad = rowBytes + passBytes <= 64 && !values.sharesCodes() &&
                 int64_t(values.SliceBytes - values.CodesBytes) >= overread;
  unsigned streamBytes = oneLoad ? rowBytes : passBytes;
  auto row = [&](Value t, unsigned bytes) {
    Value word = kb.add(kb.mul(t, kb.i32(groups * words)), kb.i32(g0 * words));
    return kb.load(VectorType::get({bytes}, b.getI8Type()),
                   access.getCodesBase(), kb.mul(kb.toI64(word), kb.i64(4)), 4,
                   /*invariant=*/true);
  };
  auto concat = llvm::to_vector(llvm::seq<int64_t>(0, 2 * passBytes));
  SmallVector<Value> zeros(count * chunks, kb.splat(kb.i32(0), lanes));
  SmallVector<Value> sums = kb.forLoop(
      kb.i32(0), kb.i32(kValueBlockTokens / 2), kb.i32(1), zeros,
      [&](Value j, ValueRange acc) -> SmallVector<Value> {
        Value token = kb.add(pageToken0, kb.mul(j, kb.i32(2)));
        Value bytes =
            oneLoad ? row(token, 64)
                    : vector::ShuffleOp::create(
                          b, kb.getLoc(), row(token, passBytes),
                          row(kb.add(token, kb.i32(1)), passBytes), concat);
        Value weightRow = kb.gep(
            roundedPairWeights,
            kb.mul(kb.toI64(kb.mul(j, kb.i32(heads * width))), kb.i64(2)));
        SmallVector<Value> next(acc.begin(), acc.end());
        for (unsigned k = 0; k < chunks; ++k) {
          SmallVector<unsigned> laneBits;
          for (unsigned l = 0; l < lanes; ++l)
            laneBits.push_back(k / groupChunks * words * 32 +
                               (k % groupChunks * lanes + l) * bits);
          Value codes = unpackPairs(kb, bytes, streamBytes, bits, laneBits);
          unsigned g = g0 + k / groupChunks;
          for (unsigned r = 0; r < count; ++r) {
            unsigned entry = (pass.firstHead + r) * width + 2 * g;
            Value pair = kb.load(i32, weightRow, kb.i64(int64_t(entry) * 2), 4);
            Value &sum = next[r * chunks + k];
            sum = target.dotI16Pairs(kb, sum, codes, kb.splat(pair, lanes));
          }
        }
        return next;
      });
  for (unsigned r = 0; r < count; ++r)
    for (unsigned k = 0; k < chunks; ++k) {
      unsigned head = pass.firstHead + r, g = g0 + k / groupChunks;
      Value scale = kb.loadF32(pairWeightScales, kb.i32(head * width + 2 * g));
      Value at =
          kb.add(kb.i32(head * dim), kb.mul(pass.firstChunk, kb.i32(lanes)));
      at = kb.add(at, kb.i32(k * lanes));
      Value total = kb.fadd(
          loadVectorF32(kb, valueSums, at, lanes),
          kb.fmul(kb.sitofp(sums[r * chunks + k]), kb.splat(scale, lanes)));
      storeVectorF32(kb, total, valueSums, at);
    }
}

void AttendEmitter::sumChannelGroupValuesOnI16(Range range) {
  // Blocks of kValueBlockTokens tokens, aligned in their page: a block's
  // weights are rounded once, then each pass (heads x chunks whose i32 sums
  // fit in registers) walks the block's token pairs and adds its sums to
  // valueSums.
  const SliceLayout &values = slice(false);
  QuantAttr quant = values.quant;
  unsigned lanes = kb.getTarget().getVectorLanes();
  unsigned groups = values.GroupsPerToken, width = 2 * groups;
  unsigned groupChunks = quant.getGroup() / lanes,
           chunks = groups * groupChunks;
  auto [passHeads, passChunks] = planValuePasses(chunks, groupChunks);
  Quantizer quantizer(kb, quant);
  for (unsigned i = 0; i < heads * chunks; ++i)
    storeVectorF32(kb, vectorF32(kb, lanes, 0), valueSums, kb.i32(i * lanes));
  Value sink = regions[1].sink;
  Range tokens = {kb.sub(range.begin, sink), kb.sub(range.end, sink)};
  Value blockTokens = kb.i32(kValueBlockTokens);
  Value firstBlock = kb.divU(tokens.begin, blockTokens);
  Value endBlock = kb.maxS(
      kb.divU(kb.add(tokens.end, kb.i32(kValueBlockTokens - 1)), blockTokens),
      firstBlock);
  Value pageTokens = kb.i32(layout.pageTokens);
  // The range's last page prefetches itself (getNextPage).
  Value lastPage =
      kb.divU(kb.mul(kb.sub(endBlock, kb.i32(1)), blockTokens), pageTokens);
  SmallVector<Value> offsets = kb.forLoop(
      firstBlock, endBlock, kb.i32(1),
      SmallVector<Value>(heads, vectorF32(kb, width, 0)),
      [&](Value block, ValueRange acc) -> SmallVector<Value> {
        Value blockStart = kb.mul(block, blockTokens);
        SliceAccess access = getBlockAccess(/*isKeys=*/false, blockStart);
        if (std::optional<SliceAccess> next = getNextPage(
                /*isKeys=*/false, kb.divU(blockStart, pageTokens), lastPage))
          prefetchTokens(*next, kb.remU(blockStart, pageTokens),
                         kValueBlockTokens);
        SmallVector<Value> sums(acc.begin(), acc.end());
        Value pageToken0 =
            roundBlockWeights(access, quantizer, blockStart, tokens, sums);
        for (unsigned h0 = 0; h0 < heads; h0 += passHeads)
          for (unsigned k0 = 0; k0 < chunks; k0 += passChunks)
            sumBlockPassOnI16(
                access, pageToken0,
                {h0, std::min(passHeads, heads - h0), kb.i32(k0), passChunks});
        return sums;
      });
  // The offsets: p * offset summed over the tokens, one per head and group.
  for (unsigned r = 0; r < heads; ++r)
    for (unsigned k = 0; k < chunks; ++k) {
      unsigned g = k / groupChunks;
      Value offset = kb.fadd(laneOf(kb, offsets[r], 2 * g),
                             laneOf(kb, offsets[r], 2 * g + 1));
      Value at = kb.i32(r * dim + k * lanes);
      storeVectorF32(kb,
                     kb.fadd(loadVectorF32(kb, valueSums, at, lanes),
                             kb.splat(offset, lanes)),
                     valueSums, at);
    }
}

//===----------------------------------------------------------------------===//
// span = tokens values
//===----------------------------------------------------------------------===//

void AttendEmitter::roundBlockValueWeights(const TokenBlocks &blocks) {
  // Per block and head: the weights' largest (they are >= 0), its scale,
  // the weights rounded against it.
  unsigned group = slice(false).quant.getGroup();
  unsigned lanes = getLanes(kb.getTarget(), group), vectors = group / lanes;
  kb.forEach(kb.i32(0), kb.mul(blocks.count, kb.i32(heads)), [&](Value i) {
    Value row = kb.mul(i, kb.i32(group));
    SmallVector<Value> weights;
    Value largest;
    for (unsigned v = 0; v < vectors; ++v) {
      weights.push_back(loadVectorF32(kb, blockWeights,
                                      kb.add(row, kb.i32(v * lanes)), lanes));
      largest = v ? kb.selectMax(weights.back(), largest) : weights.back();
    }
    Value maximum = kb.reduceMax(largest);
    kb.storeF32(kb.fmul(maximum, kb.f32(1 / kI16Max)), blockWeightScales, i);
    Value toI16 = kb.splat(scaleToI16(kb, maximum), lanes);
    for (unsigned v = 0; v < vectors; ++v)
      kb.store(roundToI16(kb, weights[v], toI16), roundedBlockWeights,
               kb.mul(kb.toI64(kb.add(row, kb.i32(v * lanes))), kb.i64(2)), 2);
  });
}

SmallVector<Value> AttendEmitter::blockValueDotsOnI16(Value packed, Value b) {
  // Per token quad (k .. k + 3) and half of the chunk's streams: lane
  // (j, s) of a vector takes stream j's codes of pair k + 2s, so that a
  // vector's bytes come from half the chunk's streams (one two-source
  // byte shuffle where all of them took two); each head's weights of the
  // quad's two pairs alternate across lanes (one 64-bit broadcast), and one
  // vpdpwssd per head and half adds them. After the block, each stream's
  // two lanes are added (the i32 sums stay exact) and go to f32 times the
  // block's scale.
  KernelTarget &target = kb.getTarget();
  const SliceLayout &values = slice(false);
  unsigned bits = values.quant.getBits(), group = values.quant.getGroup();
  unsigned words = values.WordsPerGroup, lanes = target.getVectorLanes();
  unsigned streams = lanes / 2;
  OpBuilder &builder = kb.builder();
  Location loc = kb.getLoc();
  Value bytes = vector::BitCastOp::create(
      builder, loc, VectorType::get({lanes * words * 4}, builder.getI8Type()),
      packed);
  Value row =
      kb.gep(roundedBlockWeights,
             kb.mul(kb.toI64(kb.mul(b, kb.i32(heads * group))), kb.i64(2)));
  auto pairType = VectorType::get({2}, builder.getI32Type());
  SmallVector<int64_t> alternate;
  for (unsigned l = 0; l < lanes; ++l)
    alternate.push_back(l % 2);
  SmallVector<Value> sums(2 * heads, kb.splat(kb.i32(0), lanes));
  for (unsigned k = 0; k < group; k += 4) {
    SmallVector<Value> quads;
    for (unsigned r = 0; r < heads; ++r) {
      Value quad =
          kb.load(pairType, row, kb.i64(int64_t(r * group + k) * 2), 4);
      quads.push_back(kb.shuffle(quad, alternate));
    }
    for (unsigned half = 0; half < 2; ++half) {
      SmallVector<unsigned> halfBits;
      for (unsigned j = half * streams; j < (half + 1) * streams; ++j)
        for (unsigned s = 0; s < 2; ++s) {
          unsigned bit = j * 32 * words + (k + 2 * s) * bits;
          halfBits.append({bit, bit + bits});
        }
      Value codes = unpackHalves(kb, bytes, bits, halfBits);
      for (unsigned r = 0; r < heads; ++r) {
        Value &sum = sums[half * heads + r];
        sum = target.dotI16Pairs(kb, sum, codes, quads[r]);
      }
    }
  }
  // Channel c's lanes: (c, 0) and (c, 1) of the low half's sums, or of the
  // high half's (numbered from `lanes`).
  SmallVector<int64_t> first, second;
  for (unsigned c = 0; c < lanes; ++c) {
    unsigned lane = c < streams ? 2 * c : lanes + 2 * (c - streams);
    first.push_back(lane);
    second.push_back(lane + 1);
  }
  SmallVector<Value> dots;
  for (unsigned r = 0; r < heads; ++r) {
    Value low = sums[r], high = sums[heads + r];
    Value firsts = vector::ShuffleOp::create(builder, loc, low, high, first);
    Value seconds = vector::ShuffleOp::create(builder, loc, low, high, second);
    Value channels = kb.add(firsts, seconds);
    Value scale = kb.loadF32(blockWeightScales,
                             kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r)));
    dots.push_back(kb.fmul(kb.sitofp(channels), kb.splat(scale, lanes)));
  }
  return dots;
}
