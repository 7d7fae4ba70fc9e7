//===- AttendVector.cpp - attend loops over pages as vectors --------------===//
//
// The quantized region (and full-precision pages) of the attend kernel, on
// explicit vectors of the target's vector lanes (16 f32 with AVX-512 on the
// CPU, 8 registers of a thread on the GPU), codes unpacked by kvq.unpack and
// each group's parameters folded once (Quantizer::affine):
//   - span=tokens keys: tokens are lanes; a block's slopes are folded into
//     the queries once, so a channel costs one unpack and one FMA per head;
//   - span=channels keys: channels are lanes; codes are scaled by their
//     group's slope, dotted with each head's query, and the heads' vectors
//     reduced together;
//   - span=channels values: channels are lanes; a token's weights p * slope
//     are one vector per head, broadcast to a chunk by a permute, in passes
//     over heads x chunks sized to the register file;
//   - span=tokens values: channels are lanes, the block's tokens unrolled;
//     the slopes and offsets are applied once per block;
//   - full-precision pages: channels are lanes, as the span=channels forms
//     without parameters.
// Quantized tokens are walked page by page. The same program runs on both
// targets (docs/Rationale.md, "One program on both targets"): a loop's
// tasks are spread over the block's threads, and where they are fewer than
// the threads, adjacent threads ("workers") split a task's reduction and add
// their sums (KernelTarget::sumAcrossWorkers).
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

/// Chunks of `lanes` elements handled per pass, so that `chunks * heads`
/// accumulators fit in registers.
static unsigned getChunksPerPass(const KernelTarget &target, unsigned chunks,
                                 unsigned heads) {
  return std::max(
      1u, std::min(chunks, getMaxAccumulators(target.getInfo()) / heads));
}

/// Sign-extended byte offset of f32 element `index` (may be negative for
/// lanes a mask leaves out).
static Value signedF32Offset(KernelBuilder &kb, Value index) {
  OpBuilder &b = kb.builder();
  Value wide = arith::ExtSIOp::create(b, kb.getLoc(), b.getI64Type(), index);
  return kb.mul(wide, kb.i64(4));
}

void AttendEmitter::allocateVectorBuffers() {
  KernelTarget &target = kb.getTarget();
  const SliceLayout &keys = slice(true), &values = slice(false);
  auto spansTokens = [](const SliceLayout &s) {
    return s.isQuantized() && s.quant.getSpan() == Span::Tokens;
  };
  unsigned foldedBytes = 0;
  if (spansTokens(keys)) {
    unsigned blocks = getMaxTokenBlocks(true);
    foldedBytes = blocks * heads * dim * 4;
    foldedQueries = target.allocShared(kb, foldedBytes);
    blockBiases = target.allocShared(kb, blocks * heads * 4);
    if (scoresKeysOnI16Dots()) {
      pairQueries = target.allocShared(kb, blocks * heads * dim * 2);
      blockQueryScales = target.allocShared(kb, blocks * heads * 4);
    }
  }
  if (spansTokens(values)) {
    unsigned blocks = getMaxTokenBlocks(false);
    unsigned weights = blocks * heads * values.quant.getGroup();
    if (sumsBlockValuesOnMatrix())
      matrixWeights = target.allocShared(kb, weights * 2);
    else
      blockWeights = target.allocShared(kb, weights * 4);
    blockWeightSums = target.allocShared(kb, blocks * heads * 4);
    if (sumsBlockValuesOnI16Dots()) {
      roundedBlockWeights = target.allocShared(kb, weights * 2);
      blockWeightScales = target.allocShared(kb, blocks * heads * 4);
    }
  }
  // Reordered values keep the channel-per-lane form (variable groups).
  if (forms.getValues() != ValueForm::Reordered)
    valueSums = target.allocShared(kb, heads * dim * 4);
  if (sumsValuesOnI16Dots()) {
    unsigned entries =
        kValueBlockTokens / 2 * heads * 2 * values.GroupsPerToken;
    pairWeights = target.allocShared(kb, entries * 4);
    roundedPairWeights = target.allocShared(kb, entries * 2);
    pairWeightScales =
        target.allocShared(kb, heads * 2 * values.GroupsPerToken * 4);
  }
  if (scoresChannelKeysOnMatrix())
    matrixQueries = target.allocShared(kb, heads * dim * 4);
  if (sumsValuesOnMatrix() || sumsBlockValuesOnMatrix()) {
    // The warps' shares are stored after the last score is read: they
    // take the folded queries' place where it is large enough (KIVI's keys
    // at 512-token splits would pass the 48 KB of static shared memory).
    unsigned bytes = getWarps(target) * heads * dim * 4;
    matrixPartials =
        foldedBytes >= bytes ? foldedQueries : target.allocShared(kb, bytes);
  }
}

Value AttendEmitter::unpackCodes(Value words, unsigned bits, unsigned lanes,
                                 unsigned offset, unsigned stride) {
  OpBuilder &b = kb.builder();
  Value codes = UnpackOp::create(
      b, kb.getLoc(), VectorType::get({lanes}, b.getI32Type()), words,
      b.getI32IntegerAttr(bits), b.getI32IntegerAttr(offset),
      b.getI32IntegerAttr(stride));
  return kb.uitofp(codes);
}

Value AttendEmitter::loadGroupWords(SliceAccess &access, Value n,
                                    unsigned count) {
  // One word short of a power of two (3 words of 32 3-bit codes) loads as
  // the power of two, so that LLVM emits one vector load: the extra word
  // exists, since the parameters follow the codes in every slice.
  unsigned loaded = llvm::PowerOf2Ceil(count) == count + 1 ? count + 1 : count;
  unsigned perGroup = access.getWordsPerGroup();
  Value first = kb.mul(n, kb.i32(perGroup));
  Value words =
      kb.load(VectorType::get({loaded}, kb.builder().getI32Type()),
              access.getCodesBase(), kb.mul(kb.toI64(first), kb.i64(4)), 4,
              /*invariant=*/true);
  if (loaded == count)
    return words;
  return kb.shuffle(words, llvm::to_vector(llvm::seq<int64_t>(0, count)));
}

/// Lane `lane` of `vector` in every one of `lanes` lanes.
static Value broadcastLane(KernelBuilder &kb, Value vector, unsigned lane,
                           unsigned lanes) {
  return kb.shuffle(vector, SmallVector<int64_t>(lanes, lane));
}

/// acc + the dot product of f32 vectors x and y, one FMA per lane.
static Value dotChain(KernelBuilder &kb, Value x, Value y, Value acc) {
  unsigned lanes = cast<VectorType>(x.getType()).getNumElements();
  for (unsigned lane = 0; lane < lanes; ++lane)
    acc = LLVM::FMAOp::create(kb.builder(), kb.getLoc(), laneOf(kb, x, lane),
                              laneOf(kb, y, lane), acc);
  return acc;
}

/// Sums the lanes of each of `vectors` (all of one width): together
/// (KernelBuilder::combineEach) for a power of two of them, else one
/// reduction each.
static SmallVector<Value> reduceEach(KernelBuilder &kb,
                                     ArrayRef<Value> vectors) {
  unsigned count = vectors.size();
  unsigned lanes = cast<VectorType>(vectors[0].getType()).getNumElements();
  SmallVector<Value> sums;
  if (count == 1 || !KernelBuilder::combinesEach(count, lanes)) {
    for (Value v : vectors)
      sums.push_back(kb.reduceAdd(v));
    return sums;
  }
  Value all =
      kb.combineEach(vectors, [&](Value x, Value y) { return kb.fadd(x, y); });
  for (unsigned i = 0; i < count; ++i)
    sums.push_back(laneOf(kb, all, i));
  return sums;
}

//===----------------------------------------------------------------------===//
// Spreading the loops over a block's threads
//===----------------------------------------------------------------------===//

void AttendEmitter::forEachWorker(unsigned tasks, unsigned workers,
                                  function_ref<void(Value, Value)> body) {
  forEachIteration(kb.i32(kb.getTarget().getWorkerIterations(tasks, workers)),
                   workers, body);
}

void AttendEmitter::forEachWorker(Value tasks, unsigned workers,
                                  function_ref<void(Value, Value)> body) {
  // getWorkerIterations at run time.
  unsigned align = kb.getTarget().getWorkerAlignment(workers);
  Value count =
      kb.mul(kb.divU(kb.add(kb.mul(tasks, kb.i32(workers)), kb.i32(align - 1)),
                     kb.i32(align)),
             kb.i32(align));
  forEachIteration(count, workers, body);
}

void AttendEmitter::forEachIteration(Value count, unsigned workers,
                                     function_ref<void(Value, Value)> body) {
  kb.getTarget().parallelFor(kb, count, [&](Value i) {
    body(kb.divU(i, kb.i32(workers)), kb.remU(i, kb.i32(workers)));
  });
}

void AttendEmitter::forEachUnit(unsigned units, unsigned workers,
                                function_ref<void(Value, Value)> body) {
  if (kb.getTarget().getBlockThreads() > 1)
    return forEachWorker(units, workers, body);
  // One thread: units are unrolled, so that their offsets are constants.
  for (unsigned unit = 0; unit < units; ++unit)
    body(kb.i32(unit), kb.i32(0));
}

/// x * k, folded when x is a constant (unrolled units): code offsets that
/// are constants keep their loads aligned and their shifts immediate.
static Value mulFolded(KernelBuilder &kb, Value x, int64_t k) {
  if (std::optional<int64_t> value = getConstantIntValue(x))
    return kb.i32(*value * k);
  return kb.mul(x, kb.i32(k));
}

Value AttendEmitter::loadCodeBits(SliceAccess &access, Value word, Value bit,
                                  unsigned count) {
  OpBuilder &b = kb.builder();
  unsigned words = (count + 31) / 32;
  std::optional<int64_t> staticBit = getConstantIntValue(bit);
  Value first, shift;
  if (staticBit) {
    first = kb.add(word, kb.i32(*staticBit / 32));
    shift = kb.i32(*staticBit % 32);
  } else {
    first = kb.add(word, kb.divU(bit, kb.i32(32)));
    shift = kb.remU(bit, kb.i32(32));
  }
  auto load = [&](unsigned n) {
    return kb.load(VectorType::get({n}, b.getI32Type()), access.getCodesBase(),
                   kb.mul(kb.toI64(first), kb.i64(4)), 4, /*invariant=*/true);
  };
  auto extract = [&](Value vector, unsigned i) -> Value {
    return vector::ExtractOp::create(b, kb.getLoc(), vector,
                                     ArrayRef<int64_t>{i});
  };
  // Spans on a word are loaded as they are; spans that never straddle a
  // word are shifted out of one; others are funnel-shifted out of one word
  // more (which exists: the parameters follow the codes).
  if (staticBit && *staticBit % 32 == 0)
    return load(words);
  if (32 % count == 0)
    return kb.splat(kb.shrU(extract(load(1), 0), shift), 1);
  Value loaded = load(words + 1);
  SmallVector<Value> out;
  for (unsigned i = 0; i < words; ++i)
    out.push_back(kb.callIntrinsic(
        "llvm.fshr", {extract(loaded, i + 1), extract(loaded, i), shift}));
  return vector::FromElementsOp::create(
      b, kb.getLoc(), VectorType::get({words}, b.getI32Type()), out);
}

SmallVector<Value> AttendEmitter::forEachQuantizedToken(
    Range range, bool isKeys, ValueRange init, const TokenStep &step,
    Value worker, unsigned workers, const TokenBatch *batch) {
  // Pages outer, their tokens inner: the block table is read and the
  // slice's address computed once per page, not once per token. Worker w
  // of `workers` takes every workers-th token of a page from the w-th.
  // Targets that prefetch pages stream the next page's slice in while this
  // page's tokens are read.
  const SliceLayout &slice = this->slice(isKeys);
  Value sink = regions[isKeys ? 0 : 1].sink;
  Value pageTokens = kb.i32(layout.pageTokens);
  Value first = kb.sub(range.begin, sink), end = kb.sub(range.end, sink);
  Value firstPage = kb.divU(first, pageTokens);
  Value endPage =
      kb.divU(kb.add(end, kb.i32(layout.pageTokens - 1)), pageTokens);
  endPage = kb.maxS(endPage, firstPage);
  if (!worker)
    worker = kb.i32(0);
  return kb.forLoop(
      firstPage, endPage, kb.i32(1), init,
      [&](Value page, ValueRange acc) -> SmallVector<Value> {
        Value pageStart = kb.mul(page, pageTokens);
        SliceAccess access(kb, tensor(isKeys), slice, layout.pageTokens,
                           args.pages[isKeys ? 0 : 1], tableRow(isKeys),
                           pageStart, head);
        std::optional<SliceAccess> next =
            getNextPage(isKeys, page, kb.sub(endPage, kb.i32(1)));
        Value begin = kb.add(kb.maxS(first, pageStart), worker);
        Value pageEnd = kb.add(pageStart, pageTokens);
        Value stop = kb.select(kb.ult(end, pageEnd), end, pageEnd);
        auto stepOf = [&](const TokenStep *body, unsigned tokens) {
          return [&, body, tokens](Value index, ValueRange sums) {
            Value pageToken = kb.sub(index, pageStart);
            if (next)
              prefetchTokens(*next, pageToken, tokens);
            return (*body)(access, pageToken, kb.add(index, sink), sums);
          };
        };
        if (!batch)
          return kb.forLoopInFlight(begin, stop, workers, acc,
                                    stepOf(&step, 1));
        assert(workers == 1 && "a batch takes consecutive tokens");
        return kb.forLoopBatched(begin, stop, 1, batch->tokens, acc,
                                 stepOf(&batch->step, batch->tokens),
                                 stepOf(&step, 1));
      });
}

//===----------------------------------------------------------------------===//
// span = tokens: blocks of `group` tokens
//===----------------------------------------------------------------------===//

unsigned AttendEmitter::getMaxTokenBlocks(bool isKeys) {
  // A split's quantized tokens start on a block when the split sizes the
  // runtime may plan (multiples of the granule) and the sink are whole
  // blocks (a sink region is full before anything is quantized); otherwise
  // they may touch one block more.
  unsigned group = slice(isKeys).quant.getGroup();
  unsigned sink = tensor(isKeys).window.getSink();
  bool aligned = layout.splitGranule % group == 0 && sink % group == 0;
  return (splitTokens + group - 1) / group + (aligned ? 0 : 1);
}

AttendEmitter::TokenBlocks AttendEmitter::getTokenBlocks(Range range,
                                                         bool isKeys) {
  unsigned group = slice(isKeys).quant.getGroup();
  Value sink = regions[isKeys ? 0 : 1].sink;
  Value firstBlock = kb.divU(kb.sub(range.begin, sink), kb.i32(group));
  Value endBlock = kb.divU(kb.add(kb.sub(range.end, sink), kb.i32(group - 1)),
                           kb.i32(group));
  Value count = kb.sub(kb.maxS(endBlock, firstBlock), firstBlock);
  return {firstBlock, count, getMaxTokenBlocks(isKeys)};
}

SliceAccess AttendEmitter::getBlockAccess(bool isKeys, Value first) {
  return SliceAccess(kb, tensor(isKeys), slice(isKeys), layout.pageTokens,
                     args.pages[isKeys ? 0 : 1], tableRow(isKeys), first, head);
}

std::optional<SliceAccess> AttendEmitter::getNextPage(bool isKeys, Value page,
                                                      Value lastPage) {
  // The last page of a range prefetches itself: no block-table entry past
  // the range is read.
  if (!kb.getTarget().prefetchesPages())
    return std::nullopt;
  Value next = kb.minU(kb.add(page, kb.i32(1)), lastPage);
  return getBlockAccess(isKeys, kb.mul(next, kb.i32(layout.pageTokens)));
}

void AttendEmitter::prefetchTokens(const SliceAccess &next, Value pageToken,
                                   unsigned tokens) {
  // A page's slice in equal shares per token: 64-byte lines, rounded up.
  unsigned lines =
      llvm::divideCeil(next.getSlice().SliceBytes, 64 * layout.pageTokens);
  kb.getTarget().prefetch(kb, next.getBase(),
                          kb.mul(kb.toI64(pageToken), kb.i64(64 * lines)),
                          lines * tokens);
}

void AttendEmitter::prefetchNextPage(bool isKeys, const TokenBlocks &blocks,
                                     Value b) {
  // Block b's tokens' share of the next page, as forEachQuantizedToken's
  // tokens ask for theirs.
  unsigned group = slice(isKeys).quant.getGroup();
  Value pageTokens = kb.i32(layout.pageTokens);
  Value first = kb.mul(kb.add(blocks.first, b), kb.i32(group));
  Value last = kb.mul(kb.sub(kb.add(blocks.first, blocks.count), kb.i32(1)),
                      kb.i32(group));
  if (std::optional<SliceAccess> next = getNextPage(
          isKeys, kb.divU(first, pageTokens), kb.divU(last, pageTokens)))
    prefetchTokens(*next, kb.remU(first, pageTokens), group);
}

void AttendEmitter::prefetchBlockTerms(const TokenBlocks &blocks, Value b) {
  // The fold reads only parameters, a block's 2 x dim of them a page apart,
  // and runs ahead of the scoring that streams the pages in: it asks for
  // the block a page ahead (the range's last block asks for itself).
  if (!kb.getTarget().prefetchesPages())
    return;
  unsigned group = slice(true).quant.getGroup();
  Value ahead = kb.minU(kb.add(b, kb.i32(layout.pageTokens / group)),
                        kb.sub(blocks.count, kb.i32(1)));
  Value first = kb.mul(kb.add(blocks.first, ahead), kb.i32(group));
  SliceAccess access = getBlockAccess(/*isKeys=*/true, first);
  access.prefetchParams(kb.mul(getPageBlock(first, group), kb.i32(dim)), dim);
}

Value AttendEmitter::getPageBlock(Value first, unsigned group) {
  return kb.divU(kb.remU(first, kb.i32(layout.pageTokens)), kb.i32(group));
}

AffineTerms AttendEmitter::loadBlockTerms(SliceAccess &access,
                                          Quantizer &quantizer, Value first,
                                          Value c0, unsigned lanes) {
  Value pageBlock = getPageBlock(first, access.getQuant().getGroup());
  Value n = kb.add(kb.mul(pageBlock, kb.i32(dim)), c0);
  // n is a multiple of `lanes`: whole aligned vectors.
  return quantizer.affine(access.loadScales(quantizer, n, lanes, true),
                          access.loadZeros(quantizer, n, lanes, true));
}

void AttendEmitter::foldBlockQueries(const TokenBlocks &blocks,
                                     Quantizer &quantizer) {
  // Per block and head: the queries times the block's slopes, and their dot
  // with its offsets (the common bias of the block's tokens). A chunk's
  // parameters are loaded once for every head; workers split a block's
  // chunks and add their dots. The matrix form reads the products as split
  // halves (storeSplitHalves).
  KernelTarget &target = kb.getTarget();
  unsigned group = slice(true).quant.getGroup();
  unsigned lanes = getLanes(target, dim);
  unsigned workers = getWorkers(target, blocks.max, dim / lanes);
  bool matrix = scoresKeysOnMatrix();
  // Where each worker sees one chunk of channels (the GPU), its dots are
  // chains of FMAs: no lanes summed after one product each.
  bool oneChunk = lanes * workers >= dim;
  // The i16 form also keeps each head's largest |folded query| (CPU: one
  // worker, several chunks).
  bool i16 = scoresKeysOnI16Dots();
  Type f32 = kb.builder().getF32Type();
  forEachWorker(blocks.count, workers, [&](Value b, Value worker) {
    Value valid = kb.ult(b, blocks.count);
    SmallVector<Value> dots = kb.ifThenElse(
        valid, SmallVector<Type>(heads, f32),
        [&]() -> SmallVector<Value> {
          Value first = kb.mul(kb.add(blocks.first, b), kb.i32(group));
          SliceAccess access = getBlockAccess(/*isKeys=*/true, first);
          prefetchBlockTerms(blocks, b);
          Value rows = kb.mul(b, kb.i32(heads * dim));
          SmallVector<Value> init(heads * (i16 ? 2 : 1),
                                  oneChunk ? kb.f32(0)
                                           : vectorF32(kb, lanes, 0));
          SmallVector<Value> sums = kb.forLoop(
              kb.mul(worker, kb.i32(lanes)), kb.i32(dim),
              kb.i32(lanes * workers), init,
              [&](Value c0, ValueRange acc) -> SmallVector<Value> {
                AffineTerms terms =
                    loadBlockTerms(access, quantizer, first, c0, lanes);
                SmallVector<Value> next, maxima;
                for (unsigned r = 0; r < heads; ++r) {
                  Value q = loadVectorF32(kb, normQueries,
                                          kb.add(kb.i32(r * dim), c0), lanes);
                  Value folded = kb.fmul(q, terms.slope);
                  Value at = kb.add(rows, kb.add(kb.i32(r * dim), c0));
                  if (matrix)
                    storeSplitHalves(folded, foldedQueries, at);
                  else
                    storeVectorF32(kb, folded, foldedQueries, at);
                  if (i16)
                    maxima.push_back(
                        kb.runningMax(acc[heads + r], kb.fabs(folded)));
                  next.push_back(
                      oneChunk ? dotChain(kb, q, terms.offset, acc[r])
                               : kb.fadd(acc[r], kb.fmul(q, terms.offset)));
                }
                next.append(maxima);
                return next;
              });
          if (i16)
            roundFoldedQueries(b, rows,
                               ArrayRef<Value>(sums).drop_front(heads));
          sums.resize(heads);
          return oneChunk ? sums : reduceEach(kb, sums);
        },
        [&]() -> SmallVector<Value> {
          return SmallVector<Value>(heads, kb.f32(0));
        });
    dots = target.sumAcrossWorkers(kb, dots, workers);
    kb.ifThen(kb.bitAnd(valid, kb.eq(worker, kb.i32(0))), [&] {
      for (unsigned r = 0; r < heads; ++r)
        kb.storeF32(dots[r], blockBiases,
                    kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r)));
    });
  });
}

void AttendEmitter::scoreTokenBlocks(Range range) {
  // A task scores `perPass` chunks of `lanes` tokens of one block (tokens
  // are lanes); per channel it unpacks their codes once and adds one FMA per
  // head with the folded query. Workers split the channels and add their
  // dot products.
  const SliceLayout &keys = slice(true);
  QuantAttr quant = keys.quant;
  unsigned group = quant.getGroup(), bits = quant.getBits();
  KernelTarget &target = kb.getTarget();
  unsigned lanes = getLanes(target, group), chunks = group / lanes;
  unsigned perPass = getChunksPerPass(target, chunks, heads);
  unsigned passes = (chunks + perPass - 1) / perPass;
  Quantizer quantizer(kb, quant);
  TokenBlocks blocks = getTokenBlocks(range, /*isKeys=*/true);
  foldBlockQueries(blocks, quantizer);
  bool i16 = scoresKeysOnI16Dots();
  auto scorePass = [&](Value b, Value pass, unsigned count, Value worker,
                       unsigned workers) {
    Value valid = kb.ult(b, blocks.count);
    Value first = kb.mul(kb.add(blocks.first, kb.select(valid, b, kb.i32(0))),
                         kb.i32(group));
    unsigned sliceChannels = dim / workers;
    SmallVector<Type> types(
        count * heads, VectorType::get({lanes}, kb.builder().getF32Type()));
    SmallVector<Value> dots = kb.ifThenElse(
        valid, types,
        [&]() -> SmallVector<Value> {
          SliceAccess access = getBlockAccess(/*isKeys=*/true, first);
          Value pageBlock = getPageBlock(first, group);
          Value c0 = kb.mul(worker, kb.i32(sliceChannels));
          if (i16)
            return blockDotsOnI16(access, b, pageBlock,
                                  *getConstantIntValue(pass) * perPass, count,
                                  c0, sliceChannels);
          Value passBit = mulFolded(kb, pass, perPass * lanes * bits);
          SmallVector<Value> zeros(count * heads, vectorF32(kb, lanes, 0));
          return kb.forLoop(
              c0, kb.add(c0, kb.i32(sliceChannels)), kb.i32(1), zeros,
              [&](Value c, ValueRange acc) -> SmallVector<Value> {
                Value n = kb.add(kb.mul(pageBlock, kb.i32(dim)), c);
                Value words =
                    loadCodeBits(access, kb.mul(n, kb.i32(keys.WordsPerGroup)),
                                 passBit, count * lanes * bits);
                Value queryRow =
                    f32Row(kb, foldedQueries,
                           kb.add(kb.mul(b, kb.i32(heads * dim)), c));
                SmallVector<Value> next(acc.begin(), acc.end());
                for (unsigned t = 0; t < count; ++t) {
                  Value codes =
                      unpackCodes(words, bits, lanes, t * lanes * bits, bits);
                  for (unsigned r = 0; r < heads; ++r) {
                    Value q = loadF32At(kb, queryRow, r * dim);
                    Value &sum = next[t * heads + r];
                    sum = kb.fadd(sum, kb.fmul(kb.splat(q, lanes), codes));
                  }
                }
                return next;
              });
        },
        [&]() -> SmallVector<Value> {
          return SmallVector<Value>(count * heads, vectorF32(kb, lanes, 0));
        });
    dots = target.sumAcrossWorkers(kb, dots, workers);
    // Only the block's tokens inside `range` are stored:
    // t - begin < end - begin, unsigned, per lane.
    kb.ifThen(kb.bitAnd(valid, kb.eq(worker, kb.i32(0))), [&] {
      Value blockStart = kb.add(regions[0].sink, first);
      SmallVector<int32_t> laneIds;
      for (unsigned j = 0; j < lanes; ++j)
        laneIds.push_back(j);
      for (unsigned t = 0; t < count; ++t) {
        Value chunk = kb.add(kb.mul(pass, kb.i32(perPass)), kb.i32(t));
        Value chunkStart = kb.add(blockStart, kb.mul(chunk, kb.i32(lanes)));
        Value rel = kb.add(kb.vectorI32(laneIds),
                           kb.splat(kb.sub(chunkStart, range.begin), lanes));
        Value mask =
            kb.ult(rel, kb.splat(kb.sub(range.end, range.begin), lanes));
        Value local = kb.sub(chunkStart, splitRange.begin);
        for (unsigned r = 0; r < heads; ++r) {
          Value bias = kb.loadF32(blockBiases,
                                  kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r)));
          Value score = kb.fadd(dots[t * heads + r], kb.splat(bias, lanes));
          Value index = kb.add(kb.i32(r * splitTokens), local);
          kb.maskedStore(score, scores, signedF32Offset(kb, index), mask, 4);
        }
      }
    });
  };
  if (target.getBlockThreads() == 1) {
    // One thread: blocks are a loop, passes unrolled (constant offsets).
    kb.forEach(kb.i32(0), blocks.count, [&](Value b) {
      prefetchNextPage(/*isKeys=*/true, blocks, b);
      for (unsigned pass = 0; pass < passes; ++pass)
        scorePass(b, kb.i32(pass), std::min(perPass, chunks - pass * perPass),
                  kb.i32(0), 1);
    });
    return;
  }
  assert(chunks % perPass == 0 && "passes of one size");
  unsigned workers = getWorkers(target, blocks.max * passes, dim);
  forEachWorker(kb.mul(blocks.count, kb.i32(passes)), workers,
                [&](Value task, Value worker) {
                  Value b = kb.divU(task, kb.i32(passes));
                  Value pass = kb.remU(task, kb.i32(passes));
                  scorePass(b, pass, perPass, worker, workers);
                });
}

void AttendEmitter::sumTokenBlockValues(Range range) {
  // A block's share of a chunk of `lanes` channels (lanes): per block the
  // codes of the chunk's `lanes` groups are consecutive, so one load brings
  // them all; token k of lane j sits at bit j * 32 * words + k * bits.
  // One thread walks the blocks in order, each block's chunks inner (the
  // pages stream); on the GPU a chunk is a task whose workers take every
  // workers-th block and add their sums.
  const SliceLayout &values = slice(false);
  QuantAttr quant = values.quant;
  unsigned group = quant.getGroup(), bits = quant.getBits();
  unsigned words = values.WordsPerGroup;
  KernelTarget &target = kb.getTarget();
  unsigned lanes = getLanes(target, dim), chunks = dim / lanes;
  Quantizer quantizer(kb, quant);
  TokenBlocks blocks = getTokenBlocks(range, /*isKeys=*/false);
  loadBlockWeights(range, blocks);
  bool onI16 = sumsBlockValuesOnI16Dots();
  if (onI16)
    roundBlockValueWeights(blocks);
  // Each head's sum over block b's tokens of p times a chunk's codes.
  auto blockValueDots = [&](Value packed, Value b) {
    Value weights = f32Row(kb, blockWeights, kb.mul(b, kb.i32(heads * group)));
    SmallVector<Value> dots(heads, vectorF32(kb, lanes, 0));
    for (unsigned k = 0; k < group; ++k) {
      Value codes = unpackCodes(packed, bits, lanes, k * bits, 32 * words);
      for (unsigned r = 0; r < heads; ++r) {
        Value p = loadF32At(kb, weights, r * group + k);
        dots[r] = kb.fadd(dots[r], kb.fmul(kb.splat(p, lanes), codes));
      }
    }
    return dots;
  };
  auto blockShare = [&](Value b, Value c0, ValueRange acc) {
    Value first = kb.mul(kb.add(blocks.first, b), kb.i32(group));
    SliceAccess access = getBlockAccess(/*isKeys=*/false, first);
    Value pageBlock = getPageBlock(first, group);
    Value n = kb.add(kb.mul(pageBlock, kb.i32(dim)), c0);
    Value packed = loadGroupWords(access, n, lanes * words);
    SmallVector<Value> dots =
        onI16 ? blockValueDotsOnI16(packed, b) : blockValueDots(packed, b);
    AffineTerms terms = loadBlockTerms(access, quantizer, first, c0, lanes);
    SmallVector<Value> next;
    for (unsigned r = 0; r < heads; ++r) {
      Value weightSum = kb.loadF32(blockWeightSums,
                                   kb.add(kb.mul(b, kb.i32(heads)), kb.i32(r)));
      Value sum = kb.fadd(acc[r], kb.fmul(terms.slope, dots[r]));
      next.push_back(
          kb.fadd(sum, kb.fmul(terms.offset, kb.splat(weightSum, lanes))));
    }
    return next;
  };
  auto sumsAt = [&](Value c0) {
    SmallVector<Value> sums;
    for (unsigned r = 0; r < heads; ++r)
      sums.push_back(
          loadVectorF32(kb, valueSums, kb.add(kb.i32(r * dim), c0), lanes));
    return sums;
  };
  auto store = [&](ValueRange sums, Value c0) {
    for (unsigned r = 0; r < heads; ++r)
      storeVectorF32(kb, sums[r], valueSums, kb.add(kb.i32(r * dim), c0));
  };
  if (target.getBlockThreads() == 1) {
    kb.forEach(kb.i32(0), kb.i32(heads * dim),
               [&](Value i) { kb.storeF32(kb.f32(0), valueSums, i); });
    kb.forEach(kb.i32(0), blocks.count, [&](Value b) {
      prefetchNextPage(/*isKeys=*/false, blocks, b);
      kb.forEach(kb.i32(0), kb.i32(chunks), [&](Value chunk) {
        Value c0 = kb.mul(chunk, kb.i32(lanes));
        store(blockShare(b, c0, sumsAt(c0)), c0);
      });
    });
    return;
  }
  unsigned workers = getWorkers(target, chunks, blocks.max);
  forEachWorker(chunks, workers, [&](Value chunk, Value worker) {
    Value c0 = kb.mul(chunk, kb.i32(lanes));
    // Padded tasks (chunk >= chunks) sum no block.
    Value end =
        kb.select(kb.ult(chunk, kb.i32(chunks)), blocks.count, kb.i32(0));
    SmallVector<Value> init(heads, vectorF32(kb, lanes, 0));
    SmallVector<Value> sums = kb.forLoop(
        worker, kb.maxS(end, worker), kb.i32(workers), init,
        [&](Value b, ValueRange acc) { return blockShare(b, c0, acc); });
    sums = target.sumAcrossWorkers(kb, sums, workers);
    kb.ifThen(
        kb.bitAnd(kb.ult(chunk, kb.i32(chunks)), kb.eq(worker, kb.i32(0))),
        [&] { store(sums, c0); });
  });
}

void AttendEmitter::loadBlockWeights(Range range, const TokenBlocks &blocks) {
  // Each block's probabilities, 0 outside `range` (blocks straddle splits),
  // and their sum per head: a vector of tokens at a time, by masked loads
  // (a token is in `range` where t - begin < end - begin, unsigned).
  unsigned group = slice(false).quant.getGroup();
  unsigned lanes = getLanes(kb.getTarget(), group);
  auto type = VectorType::get({lanes}, kb.builder().getF32Type());
  auto laneTokens = llvm::to_vector(llvm::seq<int32_t>(0, lanes));
  Value rangeTokens = kb.splat(kb.sub(range.end, range.begin), lanes);
  kb.getTarget().parallelFor(
      kb, kb.mul(blocks.count, kb.i32(heads)), [&](Value i) {
        Value b = kb.divU(i, kb.i32(heads)), r = kb.remU(i, kb.i32(heads));
        Value blockStart = kb.add(
            regions[1].sink, kb.mul(kb.add(blocks.first, b), kb.i32(group)));
        Value row = kb.mul(i, kb.i32(group));
        Value sum = vectorF32(kb, lanes, 0);
        for (unsigned k = 0; k < group; k += lanes) {
          Value t = kb.add(blockStart, kb.i32(k));
          Value valid = kb.ult(kb.add(kb.vectorI32(laneTokens),
                                      kb.splat(kb.sub(t, range.begin), lanes)),
                               rangeTokens);
          // Lanes before the split are masked: their offset may be negative.
          Value local = kb.add(kb.mul(r, kb.i32(splitTokens)),
                               kb.sub(t, splitRange.begin));
          Value p =
              kb.maskedLoad(type, scores, signedF32Offset(kb, local), valid, 4);
          storeVectorF32(kb, p, blockWeights, kb.add(row, kb.i32(k)));
          sum = kb.fadd(sum, p);
        }
        kb.storeF32(kb.reduceAdd(sum), blockWeightSums, i);
      });
}

//===----------------------------------------------------------------------===//
// span = channels: groups of a token's channels
//===----------------------------------------------------------------------===//

void AttendEmitter::scoreChannelGroups(Range range) {
  // Channels are lanes. Each chunk's codes are scaled by their group's
  // slope once and dotted with every head's query, the offsets weigh the
  // heads' query sums, and the heads' vectors are reduced together. Tokens
  // are spread over the block's threads. Where the query fits in the vector
  // registers the groups are unrolled, with a token's parameters as one
  // vector; otherwise they are a loop, so that the query's loads stay in it
  // instead of being hoisted out of the token loop into spilled registers.
  const SliceLayout &keys = slice(true);
  QuantAttr quant = keys.quant;
  unsigned group = quant.getGroup(), bits = quant.getBits();
  unsigned groups = keys.GroupsPerToken, words = keys.WordsPerGroup;
  KernelTarget &target = kb.getTarget();
  unsigned lanes = getLanes(target, group), groupChunks = group / lanes;
  bool unroll = heads * dim <= lanes * target.getVectorRegisters();
  Quantizer quantizer(kb, quant);
  // Adds group g's dot products with slope `slope` (a vector) to `dots`.
  auto addGroup = [&](SliceAccess &access, Value n0, Value g, Value slope,
                      SmallVector<Value> &dots) {
    Value packed = loadGroupWords(access, kb.add(n0, g), words);
    Value c0 = kb.mul(g, kb.i32(group));
    for (unsigned j = 0; j < groupChunks; ++j) {
      Value codes = kb.fmul(
          slope, unpackCodes(packed, bits, lanes, j * lanes * bits, bits));
      Value c = kb.add(c0, kb.i32(j * lanes));
      for (unsigned r = 0; r < heads; ++r) {
        Value q =
            loadVectorF32(kb, normQueries, kb.add(kb.i32(r * dim), c), lanes);
        dots[r] = kb.fadd(dots[r], kb.fmul(q, codes));
      }
    }
  };
  auto scoreToken = [&](SliceAccess &access, Value pageToken, Value t,
                        ValueRange) -> SmallVector<Value> {
    Value n0 = kb.mul(pageToken, kb.i32(groups));
    SmallVector<Value> dots(heads, vectorF32(kb, lanes, 0)), biases;
    if (unroll) {
      AffineTerms terms =
          quantizer.affine(access.loadScales(quantizer, n0, groups),
                           access.loadZeros(quantizer, n0, groups));
      // The offsets times the query's group sums start lanes [0, groups)
      // of the dots where they fit, instead of a reduction of their own.
      for (unsigned r = 0; r < heads; ++r) {
        if (groups <= lanes) {
          dots[r] = groupBiasLanes(terms.offset, r, lanes);
          continue;
        }
        biases.push_back(kb.reduceAdd(
            kb.fmul(terms.offset, groupSumsOf(r, kb.i32(0), groups))));
      }
      for (unsigned g = 0; g < groups; ++g)
        addGroup(access, n0, kb.i32(g),
                 broadcastLane(kb, terms.slope, g, lanes), dots);
    } else {
      SmallVector<Value> init(dots);
      init.append(heads, kb.f32(0));
      SmallVector<Value> sums = kb.forLoop(
          kb.i32(0), kb.i32(groups), kb.i32(1), init,
          [&](Value g, ValueRange acc) -> SmallVector<Value> {
            Value n = kb.add(n0, g);
            AffineTerms terms =
                quantizer.affine(access.loadScales(quantizer, n, 1),
                                 access.loadZeros(quantizer, n, 1));
            SmallVector<Value> next(acc.begin(), acc.begin() + heads);
            addGroup(access, n0, g, broadcastLane(kb, terms.slope, 0, lanes),
                     next);
            for (unsigned r = 0; r < heads; ++r)
              next.push_back(kb.fadd(
                  acc[heads + r],
                  kb.reduceAdd(kb.fmul(terms.offset, groupSumsOf(r, g, 1)))));
            return next;
          });
      dots.assign(sums.begin(), sums.begin() + heads);
      biases.assign(sums.begin() + heads, sums.end());
    }
    storeScores(t, dots, biases);
    return {};
  };
  forEachTokenOfThreads(range, scoreToken);
}

Value AttendEmitter::groupSumsOf(unsigned r, Value g, unsigned count) {
  unsigned groups = slice(true).GroupsPerToken;
  return kb.load(VectorType::get({count}, kb.builder().getF32Type()), groupSums,
                 kb.mul(kb.toI64(kb.add(kb.i32(r * groups), g)), kb.i64(4)), 4);
}

Value AttendEmitter::groupBiasLanes(Value offsets, unsigned r, unsigned lanes) {
  unsigned groups = slice(true).GroupsPerToken;
  Value sums = groupSumsOf(r, kb.i32(0), groups);
  SmallVector<int64_t> mask;
  for (unsigned lane = 0; lane < lanes; ++lane)
    mask.push_back(lane < groups ? lane : groups);
  return vector::ShuffleOp::create(kb.builder(), kb.getLoc(),
                                   kb.fmul(offsets, sums),
                                   vectorF32(kb, groups, 0), mask);
}

void AttendEmitter::storeScores(Value t, ArrayRef<Value> dots,
                                ArrayRef<Value> biases) {
  SmallVector<Value> values = reduceEach(kb, dots);
  for (size_t r = 0; r < biases.size(); ++r)
    values[r] = kb.fadd(values[r], biases[r]);
  storeScoreValues(t, values);
}

void AttendEmitter::storeScoreValues(Value t, ArrayRef<Value> values) {
  Value local = kb.sub(t, splitRange.begin);
  for (auto [r, score] : llvm::enumerate(values))
    kb.storeF32(score, scores, kb.add(kb.i32(r * splitTokens), local));
}

void AttendEmitter::forEachTokenOfThreads(Range range, const TokenStep &step,
                                          const TokenBatch *batch) {
  KernelTarget &target = kb.getTarget();
  unsigned threads = target.getBlockThreads();
  target.parallelFor(kb, kb.i32(threads), [&](Value thread) {
    forEachQuantizedToken(range, /*isKeys=*/true, {}, step, thread, threads,
                          threads == 1 ? batch : nullptr);
  });
}

void AttendEmitter::sumQuantizedValues(Range range) {
  switch (forms.getValues()) {
  case ValueForm::Rows:
    return sumFullPrecisionValues(range, 1);
  case ValueForm::ChannelGroupsMatrix:
    return sumChannelGroupValuesOnMatrix(range);
  case ValueForm::TokenBlocksMatrix:
    return sumTokenBlockValuesOnMatrix(range);
  case ValueForm::ChannelGroupsI16:
    return sumChannelGroupValuesOnI16(range);
  case ValueForm::ChannelGroups:
    return sumChannelGroupValues(range);
  case ValueForm::TokenBlocks:
  case ValueForm::TokenBlocksI16:
    return sumTokenBlockValues(range);
  case ValueForm::Reordered:
    // Channel per lane through KernelTarget::accumulate (valueAt).
    llvm_unreachable("reordered values have no vector sums");
  }
}

void AttendEmitter::sumChannelGroupValues(Range range) {
  // Tokens outer, the token's groups inner. A pass covers a range of heads
  // and a range of chunks of `lanes` channels, as many as keep their
  // accumulators in registers: every head first, so that each chunk of
  // codes is unpacked once. Passes of whole groups are unrolled on one
  // thread; on a GPU block each (pass, worker) is a thread, the workers
  // taking every workers-th token and adding their sums.
  const SliceLayout &values = slice(false);
  QuantAttr quant = values.quant;
  KernelTarget &target = kb.getTarget();
  unsigned groupChunks = quant.getGroup() / getLanes(target, quant.getGroup());
  unsigned chunks = values.GroupsPerToken * groupChunks;
  auto [passHeads, passChunks] = planValuePasses(chunks, groupChunks);
  Quantizer quantizer(kb, quant);
  unsigned units = chunks / passChunks;
  unsigned workers = getWorkers(target, units, layout.pageTokens);
  for (unsigned h0 = 0; h0 < heads; h0 += passHeads)
    forEachUnit(units, workers, [&](Value unit, Value worker) {
      ValuePass pass{h0, std::min(passHeads, heads - h0),
                     mulFolded(kb, unit, passChunks), passChunks};
      sumChannelGroupPass(range, quantizer, pass, unit, units, worker, workers);
    });
}

void AttendEmitter::sumChannelGroupPass(Range range, Quantizer &quantizer,
                                        const ValuePass &pass, Value unit,
                                        unsigned units, Value worker,
                                        unsigned workers) {
  const SliceLayout &values = slice(false);
  unsigned group = values.quant.getGroup(), bits = values.quant.getBits();
  unsigned groups = values.GroupsPerToken, words = values.WordsPerGroup;
  unsigned lanes = getLanes(kb.getTarget(), group), groupChunks = group / lanes;
  unsigned count = pass.heads, chunks = pass.chunks;
  // Whole groups, or part of one group.
  unsigned passGroups = std::max(1u, chunks / groupChunks);
  Value g0 = kb.divU(pass.firstChunk, kb.i32(groupChunks));
  Value chunkBit =
      chunks < groupChunks
          ? mulFolded(kb, kb.remU(pass.firstChunk, kb.i32(groupChunks)),
                      lanes * bits)
          : kb.i32(0);
  unsigned spanBits =
      chunks < groupChunks ? chunks * lanes * bits : passGroups * words * 32;
  auto unpackOffset = [&](unsigned k) {
    return chunks < groupChunks
               ? k * lanes * bits
               : k / groupChunks * words * 32 + k % groupChunks * lanes * bits;
  };
  // Per head: the chunks' vector sums, then a vector of per-group offset
  // sums. Padded units (unit >= units) see no token.
  SmallVector<Value> init(count * chunks, vectorF32(kb, lanes, 0));
  init.append(count, vectorF32(kb, passGroups, 0));
  Range tokens = {range.begin, kb.select(kb.ult(unit, kb.i32(units)), range.end,
                                         range.begin)};
  SmallVector<Value> sums = forEachQuantizedToken(
      tokens, /*isKeys=*/false, init,
      [&](SliceAccess &access, Value pageToken, Value t,
          ValueRange acc) -> SmallVector<Value> {
        Value n = kb.add(kb.mul(pageToken, kb.i32(groups)), g0);
        Value packed =
            loadCodeBits(access, kb.mul(n, kb.i32(words)), chunkBit, spanBits);
        AffineTerms terms =
            quantizer.affine(access.loadScales(quantizer, n, passGroups),
                             access.loadZeros(quantizer, n, passGroups));
        Value probabilities = f32Row(kb, scores, kb.sub(t, splitRange.begin));
        SmallVector<Value> next(acc.begin(), acc.end());
        SmallVector<Value> weights;
        for (unsigned r = 0; r < count; ++r) {
          Value p = kb.splat(
              loadF32At(kb, probabilities, (pass.firstHead + r) * splitTokens),
              passGroups);
          weights.push_back(kb.fmul(p, terms.slope));
          Value &offsets = next[count * chunks + r];
          offsets = kb.fadd(offsets, kb.fmul(p, terms.offset));
        }
        for (unsigned k = 0; k < chunks; ++k) {
          Value codes = unpackCodes(packed, bits, lanes, unpackOffset(k), bits);
          for (unsigned r = 0; r < count; ++r) {
            Value &sum = next[r * chunks + k];
            Value w = broadcastLane(kb, weights[r], k / groupChunks, lanes);
            sum = kb.fadd(sum, kb.fmul(w, codes));
          }
        }
        return next;
      },
      worker, workers);
  sums = kb.getTarget().sumAcrossWorkers(kb, sums, workers);
  kb.ifThen(
      kb.bitAnd(kb.ult(unit, kb.i32(units)), kb.eq(worker, kb.i32(0))), [&] {
        Value firstChannel = kb.mul(pass.firstChunk, kb.i32(lanes));
        for (unsigned r = 0; r < count; ++r)
          for (unsigned k = 0; k < chunks; ++k) {
            Value offset = broadcastLane(kb, sums[count * chunks + r],
                                         k / groupChunks, lanes);
            Value channel = kb.add(firstChannel, kb.i32(k * lanes));
            storeVectorF32(kb, kb.fadd(sums[r * chunks + k], offset), valueSums,
                           kb.add(kb.i32((pass.firstHead + r) * dim), channel));
          }
      });
}

//===----------------------------------------------------------------------===//
// Full-precision pages (fp16 caches and layers)
//===----------------------------------------------------------------------===//

Value AttendEmitter::loadRowChunk(Value base, Value element, unsigned lanes) {
  // Chunks start on `lanes` elements of a row, and rows on 16 bytes.
  Type dtype = model.getDtype();
  unsigned bytes = dtype.getIntOrFloatBitWidth() / 8;
  Value chunk = kb.load(VectorType::get({lanes}, dtype), base,
                        kb.mul(kb.toI64(element), kb.i64(bytes)),
                        std::min(16u, lanes * bytes), /*invariant=*/true);
  if (dtype.isF32())
    return chunk;
  return arith::ExtFOp::create(
      kb.builder(), kb.getLoc(),
      VectorType::get({lanes}, kb.builder().getF32Type()), chunk);
}

void AttendEmitter::scoreFullPrecisionRows(Range range) {
  // A token per thread, its channels as lanes: one load per chunk, dotted
  // with each head's query chunk; the heads' vectors reduced together.
  KernelTarget &target = kb.getTarget();
  unsigned lanes = getLanes(target, dim), chunks = dim / lanes;
  bool unroll = heads * dim <= lanes * target.getVectorRegisters();
  auto addChunk = [&](SliceAccess &access, Value row, Value c0,
                      SmallVector<Value> &dots) {
    Value keys = loadRowChunk(access.getBase(), kb.add(row, c0), lanes);
    for (unsigned r = 0; r < heads; ++r) {
      Value q = loadVectorF32(kb, queries, kb.add(kb.i32(r * dim), c0), lanes);
      dots[r] = kb.fadd(dots[r], kb.fmul(q, keys));
    }
  };
  auto scoreToken = [&](SliceAccess &access, Value pageToken, Value t,
                        ValueRange) -> SmallVector<Value> {
    Value row = kb.mul(pageToken, kb.i32(dim));
    SmallVector<Value> dots(heads, vectorF32(kb, lanes, 0));
    if (unroll) {
      for (unsigned k = 0; k < chunks; ++k)
        addChunk(access, row, kb.i32(k * lanes), dots);
    } else {
      dots = kb.forLoopInFlight(
          kb.i32(0), kb.i32(dim), lanes, dots,
          [&](Value c0, ValueRange acc) -> SmallVector<Value> {
            SmallVector<Value> next(acc.begin(), acc.end());
            addChunk(access, row, c0, next);
            return next;
          });
    }
    storeScores(t, dots, {});
    return {};
  };
  forEachTokenOfThreads(range, scoreToken);
}

void AttendEmitter::sumFullPrecisionValues(Range range, unsigned region) {
  // As span=channels values with slope 1 and offset 0: a pass of heads x
  // chunks of channels, the tokens split among workers. Region 1's rows are
  // pages and set valueSums; the sinks' (0) and the window's (2) are rows
  // of their buffers and add to it.
  KernelTarget &target = kb.getTarget();
  unsigned lanes = getLanes(target, dim), chunks = dim / lanes;
  auto [passHeads, passChunks] = planValuePasses(chunks, chunks);
  unsigned units = chunks / passChunks;
  unsigned workers = getWorkers(target, units, layout.pageTokens);
  // step(base, element of the row's channel 0, t, sums) for each token.
  using RowStep =
      function_ref<SmallVector<Value>(Value, Value, Value, ValueRange)>;
  auto forEachRow = [&](Range tokens, ValueRange init, Value worker,
                        RowStep step) -> SmallVector<Value> {
    if (region == 1)
      return forEachQuantizedToken(
          tokens, /*isKeys=*/false, init,
          [&](SliceAccess &access, Value pageToken, Value t, ValueRange acc) {
            return step(access.getBase(), kb.mul(pageToken, kb.i32(dim)), t,
                        acc);
          },
          worker, workers);
    Value quantEnd = kb.add(regions[1].sink, regions[1].quantized);
    Value first = kb.add(tokens.begin, worker);
    return kb.forLoop(
        first, kb.maxS(tokens.end, first), kb.i32(workers), init,
        [&](Value t, ValueRange acc) -> SmallVector<Value> {
          if (region == 0)
            return step(args.sink[1],
                        fullPrecisionRow(kb, model,
                                         tensor(false).window.getSink(), slot,
                                         t, head),
                        t, acc);
          return step(args.window[1],
                      windowTokenRow(false, kb.sub(t, quantEnd)), t, acc);
        });
  };
  for (unsigned h0 = 0; h0 < heads; h0 += passHeads) {
    unsigned count = std::min(passHeads, heads - h0);
    forEachUnit(units, workers, [&](Value unit, Value worker) {
      Value c0 = mulFolded(kb, unit, passChunks * lanes);
      Range tokens = {range.begin, kb.select(kb.ult(unit, kb.i32(units)),
                                             range.end, range.begin)};
      SmallVector<Value> init(count * passChunks, vectorF32(kb, lanes, 0));
      SmallVector<Value> sums = forEachRow(
          tokens, init, worker,
          [&](Value base, Value row, Value t,
              ValueRange acc) -> SmallVector<Value> {
            Value probabilities =
                f32Row(kb, scores, kb.sub(t, splitRange.begin));
            row = kb.add(row, c0);
            SmallVector<Value> next(acc.begin(), acc.end());
            for (unsigned k = 0; k < passChunks; ++k) {
              Value v =
                  loadRowChunk(base, kb.add(row, kb.i32(k * lanes)), lanes);
              for (unsigned r = 0; r < count; ++r) {
                Value p = loadF32At(kb, probabilities, (h0 + r) * splitTokens);
                Value &sum = next[r * passChunks + k];
                sum = kb.fadd(sum, kb.fmul(kb.splat(p, lanes), v));
              }
            }
            return next;
          });
      sums = target.sumAcrossWorkers(kb, sums, workers);
      kb.ifThen(
          kb.bitAnd(kb.ult(unit, kb.i32(units)), kb.eq(worker, kb.i32(0))),
          [&] {
            for (unsigned r = 0; r < count; ++r)
              for (unsigned k = 0; k < passChunks; ++k) {
                Value at = kb.add(kb.i32((h0 + r) * dim + k * lanes), c0);
                Value sum = sums[r * passChunks + k];
                if (region != 1)
                  sum = kb.fadd(sum, loadVectorF32(kb, valueSums, at, lanes));
                storeVectorF32(kb, sum, valueSums, at);
              }
          });
    });
  }
}
