//===- IntegerDotBlocks.cpp - sums over tokens on integer dots ------------===//
//
// The form of a reduction `sum_t p_r(t) * dequantize(code(t, c))` over a
// run of tokens whose lanes are channels c of one group (Vectorizer.h,
// ValueDotPlan: a split's span=channels value sums) on a host with i16
// pair dots (docs/Numerics.md, "Attention on integer dots", span=channels
// values). The tokens run in blocks of kValueDotBlock, each vector's first
// token at a multiple of the lanes of its page. Per block and group of the
// vector iteration's chunks, the tokens are the lanes: each head's weights
// times the tokens' slopes, their largest magnitude and the weights' sum
// with the offsets (every group's and head's reduced together), then the
// weights rounded to i16 against the largest. Then one pass over the
// block's pairs of tokens serves all the chunks, 16 tokens at a time (a
// vector of them, in one page), what their codes' addressing shares (the
// page's row) found once for them: each lane's two codes are one i32
// (where a code is `(word >> shift) & mask` of a word the lanes share, the
// two tokens' words of every chunk are one byte vector, a vector load a
// token where the chunks' words are consecutive, and each chunk's pairs
// one shuffle, shift and mask: unpackHalves, the emitted form's)
// dotted with its group's two rounded weights of the head by one
// `vpdpwssd`, and the exact i32 sums go to f32 times the block's scale,
// plus the offsets. The tokens before the first block and after the last
// are f32 products, as without dots.
//
//===----------------------------------------------------------------------===//

#include "ExactIndex.h"
#include "ParallelForms.h"
#include "Vectorizer.h"

#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVectorExtras.h"

#include <limits>

using namespace mlir;
using namespace kvq;

/// The ops of `body` that `roots` need and the prefetches, in its order.
static SmallVector<Operation *> getTokenOps(Block *body, ValueRange roots) {
  SmallVector<Value> all(roots);
  SmallVector<Operation *> prefetches;
  for (auto prefetch : body->getOps<memref::PrefetchOp>()) {
    llvm::append_range(all, prefetch->getOperands());
    prefetches.push_back(prefetch);
  }
  llvm::SetVector<Operation *> ops;
  for (Operation *op : getSliceInBlock(body, all))
    ops.insert(op);
  ops.insert(prefetches.begin(), prefetches.end());
  SmallVector<Operation *> ordered = ops.takeVector();
  llvm::sort(ordered,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  return ordered;
}

unsigned Vectorizer::getChunksSharing(scf::ParallelOp reduction,
                                      ValueRange roots, unsigned chunks) const {
  // The ops that give `roots`: the reduction body's, then those of the
  // loop's body they read (they come before the reduction).
  Block *body = reduction.getBody();
  SmallVector<Operation *> inner = getSliceInBlock(body, roots);
  SmallVector<Value> outside;
  for (Operation *op : inner)
    for (Value operand : op->getOperands())
      if (operand.getParentBlock() == reduction->getBlock())
        outside.push_back(operand);
  SmallVector<Operation *> ops =
      getSliceInBlock(reduction->getBlock(), outside);
  ops.append(inner);
  // Runs of m chunks from a multiple of m: m divides the chunks.
  for (unsigned m = chunks; m > 1; --m) {
    if (chunks % m != 0)
      continue;
    Vectorizer wide(iv, lanes * m, maxLoadStride);
    if (wide.analyze(ops) && llvm::none_of(roots, [&](Value root) {
          return wide.varying.contains(root);
        }))
      return m;
  }
  return 1;
}

arith::ShRUIOp kvq::matchShiftedWord(Value code, unsigned bits) {
  auto masked = code.getDefiningOp<arith::AndIOp>();
  APInt mask;
  if (bits > 8 || !masked ||
      !matchPattern(masked.getRhs(), m_ConstantInt(&mask)) ||
      mask != (uint64_t(1) << bits) - 1)
    return {};
  auto shifted = masked.getLhs().getDefiningOp<arith::ShRUIOp>();
  if (!shifted || !shifted.getType().isInteger(32))
    return {};
  return shifted;
}

std::optional<std::pair<Value, SmallVector<unsigned>>>
Vectorizer::matchCodeInWord(Value code, unsigned bits) const {
  arith::ShRUIOp shifted = matchShiftedWord(code, bits);
  if (!shifted || varying.contains(shifted.getLhs()))
    return std::nullopt;
  std::optional<LaneForm> shift = getForm(shifted.getRhs());
  if (!shift || shift->align != 0)
    return std::nullopt;
  SmallVector<unsigned> shifts;
  for (unsigned l = 0; l < lanes; ++l) {
    int64_t bit = shift->offset + shift->stride * l;
    if (bit < 0 || bit + bits > 32)
      return std::nullopt;
    shifts.push_back(bit);
  }
  return std::make_pair(shifted.getLhs(), shifts);
}

std::optional<ExactLane> Vectorizer::getExactLane(unsigned chunks,
                                                  int64_t lane) const {
  if (aligned)
    return ExactLane{{{aligned, ExactIndex{alignedTo, lane, {}}}}, {iv}};
  auto arg = dyn_cast<BlockArgument>(iv);
  auto loop = arg ? dyn_cast<scf::ParallelOp>(arg.getOwner()->getParentOp())
                  : scf::ParallelOp();
  APInt lower, step;
  if (!loop || !matchPattern(loop.getLowerBound()[0], m_ConstantInt(&lower)) ||
      !matchPattern(loop.getStep()[0], m_ConstantInt(&step)) ||
      !lower.isZero() || !step.isOne())
    return std::nullopt;
  return ExactLane{{{iv, ExactIndex{int64_t(lanes) * chunks, lane, {}}}}, {iv}};
}

memref::LoadOp Vectorizer::matchWordsInRow(Value word, unsigned chunks) const {
  auto load = word.getDefiningOp<memref::LoadOp>();
  if (!load || load.getIndices().size() != 1 ||
      !load.getMemRefType().isLastDimUnitStride() ||
      dependsOn(load.getMemRef(), iv))
    return {};
  // Chunk c's first lane at c * lanes.
  SmallVector<ExactLane> firsts;
  for (unsigned c = 0; c < chunks; ++c) {
    std::optional<ExactLane> lane = getExactLane(chunks, int64_t(c) * lanes);
    if (!lane)
      return {};
    firsts.push_back(std::move(*lane));
  }
  if (!getSpacedIndex(load.getIndices()[0], firsts, 1))
    return {};
  return load;
}

std::optional<ValueDotPlan>
Vectorizer::matchValueDots(scf::ParallelOp reduction, IntegerDots dots,
                           unsigned chunks) const {
  // Weights rounded to 8 bits move the outputs by up to 2.8% of the
  // largest where the keys' 8-bit factors move them by 1.3%: over the 2%
  // that 8-bit factors are held to (docs/Numerics.md), so only 16-bit ones.
  if (lanes != 16 || dots.bits < 16 || !isRunTimeLoop(reduction) ||
      kValueDotBlock % lanes != 0 || kValueDotBlock % dots.k != 0)
    return std::nullopt;
  std::optional<DotTerms> terms = matchDotTerms(reduction, dots);
  if (!terms)
    return std::nullopt;
  auto term = cast<DequantizeOp>(terms->dequantize);
  if (!dots.sumsFit(kValueDotBlock, term.getScheme().getBits()))
    return std::nullopt;
  // The body computes the sums and prefetches rows, nothing else.
  Block *body = reduction.getBody();
  for (Operation &op : body->without_terminator())
    if (!isPure(&op) && !isa<memref::LoadOp, memref::PrefetchOp>(op))
      return std::nullopt;
  SmallVector<Value> roots = {term.getScale(), term.getZero()};
  unsigned groupChunks = getChunksSharing(reduction, roots, chunks);
  roots.append(terms->factors);
  SmallVector<Operation *> tokenOps = getTokenOps(body, roots);
  // The tokens as lanes, from any token or, where a vector must lie in one
  // page, from a multiple of the lanes of a token's place.
  Value token = reduction.getInductionVars()[0];
  Vectorizer anywhere(token, lanes, kMaxLoadStrideAround);
  Value shifted;
  if (!anywhere.analyze(tokenOps)) {
    for (Value candidate : anywhere.getShiftedInductions(*body)) {
      if (!llvm::all_of(getSliceInBlock(body, candidate), [](Operation *op) {
            return isPure(op) && op->getNumRegions() == 0;
          }))
        continue;
      Vectorizer aligned(token, lanes, kMaxLoadStrideAround);
      aligned.assumeAligned(candidate, lanes);
      if (aligned.analyze(tokenOps)) {
        shifted = candidate;
        break;
      }
    }
    if (!shifted)
      return std::nullopt;
  }
  // A token's code, or its word where it is one the lanes share: what a
  // vector of the lanes' tokens share (the page's lookup) from its first
  // token's, once for them. Its words are not loaded over the tokens, so of
  // any lane stride.
  auto inWord = matchCodeInWord(term.getCode(), term.getScheme().getBits());
  SmallVector<Operation *> codeOps =
      getSliceInBlock(body, inWord ? inWord->first : term.getCode());
  Vectorizer run(token, lanes, std::numeric_limits<int64_t>::max());
  if (shifted)
    run.assumeAligned(shifted, lanes);
  SmallVector<Operation *> shared = run.getUniformOps(codeOps);
  SmallVector<Value> sharedValues;
  for (Operation *op : shared)
    llvm::append_range(sharedValues, op->getResults());
  llvm::SmallPtrSet<Operation *, 16> isShared(shared.begin(), shared.end());
  SmallVector<Operation *> ofToken = llvm::filter_to_vector(
      codeOps, [&](Operation *op) { return !isShared.contains(op); });
  return ValueDotPlan{*terms,
                      groupChunks,
                      tokenOps,
                      shifted,
                      getSliceInBlock(body, sharedValues),
                      ofToken,
                      inWord ? inWord->first : Value(),
                      inWord ? inWord->second : SmallVector<unsigned>(),
                      inWord ? matchWordsInRow(inWord->first, chunks)
                             : memref::LoadOp(),
                      {},
                      {}};
}

void Vectorizer::widenValueDots(OpBuilder &b,
                                MutableArrayRef<LaneChunk> chunks) {
  ValueDotPlan &plan = *valueDots;
  scf::ParallelOp reduction = plan.reduction;
  Location loc = reduction.getLoc();
  ProgramBuilder pb(b, loc);
  Block *body = reduction.getBody();
  Value token = reduction.getInductionVars()[0];
  IRMapping &first = chunks.front().mapping;
  Value count = first.lookupOrDefault(reduction.getUpperBound()[0]);
  // The first token whose `shifted` is a multiple of the lanes: (lanes - k
  // mod lanes) mod lanes, k its value at token 0; at most `count`.
  Value start = pb.index(0);
  if (plan.shifted) {
    IRMapping atZero = first;
    for (auto [value, scalar] : chunks.front().firstLanes.getValueMap())
      atZero.map(value, scalar);
    atZero.map(iv, chunks.front().first);
    atZero.map(token, pb.index(0));
    for (Operation *op : getSliceInBlock(body, plan.shifted))
      b.clone(*op, atZero);
    Value k = atZero.lookupOrDefault(plan.shifted);
    if (!k.getType().isIndex())
      k = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), k);
    Value step = pb.index(lanes);
    start = pb.minU(pb.remU(pb.sub(step, pb.remU(k, step)), step), count);
  }
  // The lanes' channels, once for the three loops below.
  for (LaneChunk &chunk : chunks)
    mapLaneIndices(b, loc, chunk);
  Value blockTokens = pb.index(kValueDotBlock);
  Value end = pb.add(
      start, pb.mul(pb.divU(pb.sub(count, start), blockTokens), blockTokens));
  // The tokens before the first block, as f32 products.
  widenLoop(reduction, b, chunks, {}, start, {});
  SmallVector<Value> sums;
  for (LaneChunk &chunk : chunks)
    for (Value result : reduction.getResults())
      sums.push_back(chunk.mapping.lookupOrDefault(result));
  auto blocks = scf::ForOp::create(
      b, loc, start, end, blockTokens, sums,
      [&](OpBuilder &, Location, Value blockStart, ValueRange acc) {
        SmallVector<Value> next(acc);
        widenValueDotBlock(b, chunks, blockStart, next);
        scf::YieldOp::create(b, loc, next);
      });
  // The tokens after the last block, from the blocks' sums.
  widenLoop(reduction, b, chunks, end, {}, blocks.getResults());
}

void Vectorizer::widenValueDotBlock(OpBuilder &b,
                                    MutableArrayRef<LaneChunk> chunks,
                                    Value blockStart,
                                    MutableArrayRef<Value> sums) {
  ValueDotPlan &plan = *valueDots;
  scf::ParallelOp reduction = plan.reduction;
  auto dequantize = cast<DequantizeOp>(plan.dequantize);
  Location loc = reduction.getLoc();
  ProgramBuilder pb(b, loc);
  Value token = reduction.getInductionVars()[0];
  unsigned heads = plan.factors.size();
  IntegerDots dots = plan.dots;
  Quantizer quantizer(pb, dequantize.getScheme());
  Vectorizer tokens(token, lanes, kMaxLoadStrideAround);
  if (plan.shifted)
    tokens.assumeAligned(plan.shifted, lanes);
  bool analyzed = tokens.analyze(plan.tokenOps);
  assert(analyzed && "matchValueDots analyzed the tokens' ops");
  (void)analyzed;
  // Per group of chunks (its parameters from its first chunk's first lane)
  // and head: the block's rounded weights at [group][head][token], their
  // scale and the weights' sum with the offsets.
  unsigned groups = chunks.size() / plan.groupChunks;
  SmallVector<SmallVector<Value>> weights(groups * heads);
  SmallVector<Value> largest(groups * heads), offsets(groups * heads);
  for (unsigned g = 0; g < groups; ++g) {
    // The tokens as the lanes, a vector at a time: each head's weights
    // times the slopes, their largest magnitude and their sum with the
    // offsets.
    LaneChunk &leader = chunks[g * plan.groupChunks];
    for (int64_t v = 0; v < kValueDotBlock; v += lanes) {
      LaneChunk lanesOf(pb.add(blockStart, pb.index(v)));
      lanesOf.mapping = leader.mapping;
      for (auto [value, scalar] : leader.firstLanes.getValueMap())
        lanesOf.mapping.map(value, scalar);
      lanesOf.mapping.map(iv, leader.first);
      // The token is the lanes' own, not where the chunks last read one.
      lanesOf.mapping.erase(token);
      for (Operation *op : plan.tokenOps)
        // The block's rows are prefetched once, with the first group's.
        if (g == 0 || !isa<memref::PrefetchOp>(op))
          tokens.widenOp(*op, b, lanesOf);
      auto vectorOf = [&](Value value) {
        return tokens.asVector(b, loc, lanesOf.mapping.lookupOrDefault(value));
      };
      AffineTerms terms = quantizer.affine(vectorOf(dequantize.getScale()),
                                           vectorOf(dequantize.getZero()));
      for (unsigned r = 0; r < heads; ++r) {
        unsigned i = g * heads + r;
        Value p = vectorOf(plan.factors[r]);
        Value w = pb.fmul(p, terms.slope);
        Value magnitude = pb.fabs(w), offset = pb.fmul(p, terms.offset);
        weights[i].push_back(w);
        largest[i] = v ? pb.selectMax(largest[i], magnitude) : magnitude;
        offsets[i] = v ? pb.fadd(offsets[i], offset) : offset;
      }
    }
  }
  // Each group's and head's weights rounded against their largest. The
  // lanes of all of them are reduced together where they are a power of
  // two (KernelBuilder::combineEach), not each on its own.
  auto reduceEach = [&](ArrayRef<Value> vectors,
                        function_ref<Value(Value, Value)> combine,
                        function_ref<Value(Value)> reduce) {
    SmallVector<Value> results;
    if (vectors.size() == 1 ||
        !KernelBuilder::combinesEach(vectors.size(), lanes)) {
      for (Value vector : vectors)
        results.push_back(reduce(vector));
      return results;
    }
    Value each = pb.combineEach(vectors, combine);
    for (unsigned i = 0; i < vectors.size(); ++i)
      results.push_back(vector::ExtractOp::create(
          b, loc, each, ArrayRef<int64_t>{int64_t(i)}));
    return results;
  };
  SmallVector<Value> maxima = reduceEach(
      largest, [&](Value x, Value y) { return pb.selectMax(x, y); },
      [&](Value x) { return pb.reduceMax(x); });
  SmallVector<Value> offsetSums = reduceEach(
      offsets, [&](Value x, Value y) { return pb.fadd(x, y); },
      [&](Value x) { return pb.reduceAdd(x); });
  SmallVector<Value> scales;
  for (unsigned i = 0; i < groups * heads; ++i) {
    Value toFactors = pb.splat(dots.scaleToFactors(pb, maxima[i]), lanes);
    scales.push_back(pb.fmul(maxima[i], pb.f32(1 / dots.getFactorMax())));
    for (auto [v, w] : llvm::enumerate(weights[i]))
      pb.storeVector(dots.round(pb, w, toFactors), plan.rounded,
                     pb.index(i * kValueDotBlock + v * lanes));
  }
  // Per k tokens, each chunk's lanes' k codes against each head's k
  // rounded factors of the chunk's group: one pass over the block's tokens
  // for all the chunks, each token's row found once, the lookup of the
  // rows of a vector of the tokens (their page) once for them.
  SmallVector<Value> zeros(chunks.size() * heads, pb.splat(pb.i32(0), lanes));
  auto packs = scf::ForOp::create(
      b, loc, pb.index(0), pb.index(kValueDotBlock), pb.index(lanes), zeros,
      [&](OpBuilder &, Location, Value run, ValueRange runSums) {
        Value runStart = pb.add(blockStart, run);
        for (LaneChunk &chunk : chunks) {
          chunk.mapping.map(token, runStart);
          for (Operation *op : plan.codeOpsOfRun)
            widenOp(*op, b, chunk);
        }
        auto pairs = scf::ForOp::create(
            b, loc, pb.index(0), pb.index(lanes), pb.index(dots.k), runSums,
            [&](OpBuilder &, Location, Value j, ValueRange acc) {
              scf::YieldOp::create(b, loc,
                                   widenValueDotStep(b, chunks, blockStart,
                                                     pb.add(run, j), acc));
            });
        scf::YieldOp::create(b, loc, pairs.getResults());
      });
  for (unsigned c = 0; c < chunks.size(); ++c)
    for (unsigned r = 0; r < heads; ++r) {
      unsigned g = c / plan.groupChunks;
      Value &sum = sums[c * heads + r];
      Value dot = pb.sitofp(packs.getResult(c * heads + r));
      sum = pb.fadd(
          sum, pb.fadd(pb.fmul(dot, pb.splat(scales[g * heads + r], lanes)),
                       pb.splat(offsetSums[g * heads + r], lanes)));
    }
}

Value Vectorizer::widenCodeSource(OpBuilder &b, LaneChunk &chunk, Value token) {
  ValueDotPlan &plan = *valueDots;
  chunk.mapping.map(plan.reduction.getInductionVars()[0], token);
  for (Operation *op : plan.codeOpsOfToken)
    widenOp(*op, b, chunk);
  Value code = plan.codeWord ? plan.codeWord
                             : cast<DequantizeOp>(plan.dequantize).getCode();
  return chunk.mapping.lookupOrDefault(code);
}

SmallVector<Value>
Vectorizer::packCodesOfWords(OpBuilder &b, MutableArrayRef<LaneChunk> chunks,
                             Value token) {
  ValueDotPlan &plan = *valueDots;
  Location loc = plan.reduction.getLoc();
  ProgramBuilder pb(b, loc);
  unsigned k = plan.dots.k;
  // Token-major: the word of token `part` and chunk c is element
  // part * chunks + c; where the chunks' words are a row, a load each token.
  Value words;
  if (memref::LoadOp load = plan.codeWordLoad) {
    Value memref = load.getMemRef(), index = load.getIndices()[0];
    SmallVector<Operation *> rowOps = llvm::filter_to_vector(
        plan.codeOpsOfToken, [&](Operation *op) { return op != load; });
    SmallVector<Value> rows;
    for (unsigned part = 0; part < k; ++part) {
      LaneChunk &first = chunks.front();
      first.mapping.map(plan.reduction.getInductionVars()[0],
                        pb.add(token, pb.index(part)));
      for (Operation *op : rowOps)
        widenOp(*op, b, first);
      rows.push_back(vector::LoadOp::create(
          b, loc, VectorType::get({int64_t(chunks.size())}, b.getI32Type()),
          first.mapping.lookupOrDefault(memref),
          first.mapping.lookupOrDefault(index)));
    }
    words = pb.concat(rows);
  } else {
    SmallVector<Value> scalars;
    for (unsigned part = 0; part < k; ++part)
      for (LaneChunk &chunk : chunks)
        scalars.push_back(
            widenCodeSource(b, chunk, pb.add(token, pb.index(part))));
    words = vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(k * chunks.size())}, b.getI32Type()),
        scalars);
  }
  Value bytes = vector::BitCastOp::create(
      b, loc, VectorType::get({int64_t(4 * k * chunks.size())}, b.getI8Type()),
      words);
  unsigned bits = cast<DequantizeOp>(plan.dequantize).getScheme().getBits();
  SmallVector<Value> packs;
  for (unsigned c = 0; c < chunks.size(); ++c) {
    SmallVector<unsigned> halfBits;
    for (unsigned shift : plan.codeShifts)
      for (unsigned part = 0; part < k; ++part)
        halfBits.push_back(32 * (part * chunks.size() + c) + shift);
    packs.push_back(unpackHalves(pb, bytes, bits, halfBits));
  }
  return packs;
}

SmallVector<Value>
Vectorizer::packCodesByToken(OpBuilder &b, MutableArrayRef<LaneChunk> chunks,
                             Value token) {
  ValueDotPlan &plan = *valueDots;
  Location loc = plan.reduction.getLoc();
  ProgramBuilder pb(b, loc);
  SmallVector<Value> packs;
  for (LaneChunk &chunk : chunks) {
    Value pack = asVector(b, loc, widenCodeSource(b, chunk, token));
    for (unsigned part = 1; part < plan.dots.k; ++part) {
      Value codes = asVector(
          b, loc, widenCodeSource(b, chunk, pb.add(token, pb.index(part))));
      pack = pb.bitOr(
          pack, pb.shl(codes, pb.splat(pb.i32(part * plan.dots.bits), lanes)));
    }
    packs.push_back(pack);
  }
  return packs;
}

SmallVector<Value>
Vectorizer::widenValueDotStep(OpBuilder &b, MutableArrayRef<LaneChunk> chunks,
                              Value blockStart, Value offset, ValueRange sums) {
  ValueDotPlan &plan = *valueDots;
  Location loc = plan.reduction.getLoc();
  ProgramBuilder pb(b, loc);
  unsigned heads = plan.factors.size();
  unsigned groups = chunks.size() / plan.groupChunks;
  IntegerDots dots = plan.dots;
  // Each chunk's k codes a lane: where the codes are a shared word's bits,
  // one byte shuffle, shift and mask for every chunk's pairs.
  Value token = pb.add(blockStart, offset);
  SmallVector<Value> codePacks = plan.codeWord
                                     ? packCodesOfWords(b, chunks, token)
                                     : packCodesByToken(b, chunks, token);
  Type laneType = VectorType::get({int64_t(lanes)}, b.getI32Type());
  SmallVector<Value> factorPacks;
  for (unsigned i = 0; i < groups * heads; ++i)
    factorPacks.push_back(vector::BroadcastOp::create(
        b, loc, laneType,
        pb.loadElement(plan.roundedPacks,
                       pb.divU(pb.add(pb.index(i * kValueDotBlock), offset),
                               pb.index(dots.k)))));
  SmallVector<Value> next;
  for (auto [c, pack] : llvm::enumerate(codePacks)) {
    unsigned g = c / plan.groupChunks;
    for (unsigned r = 0; r < heads; ++r)
      next.push_back(
          dots.dot(pb, sums[c * heads + r], pack, factorPacks[g * heads + r]));
  }
  return next;
}
