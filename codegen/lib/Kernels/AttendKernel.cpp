//===- AttendKernel.cpp - fused dequantize + decode attention -------------===//
//
// Block (s, h, b) attends the R = Hq / Hkv query heads of kv-head h of
// sequence b over split s of its tokens (flash-decoding): every key and value
// is read once for a tile of up to kMaxTileHeads of the R heads, whose
// accumulators live in registers; more heads loop over tiles, so that code
// size and registers do not grow with R. Phases, separated by block barriers:
//   1. queries to f32, scaled by softmax scale * log2(e) (and by the key
//      norms for the quantized keys; rotated to the last position when an
//      unrotated query meets pre-RoPE keys);
//   2. scores, per region (sink, quantized, window) so that no loop
//      branches per token; scales and zero-points are folded into the dot
//      products (q.(s*c + z) = s*(q.c) + z*(sum q)). Quantized keys are
//      scored by the vector forms (AttendVector.cpp), the same program on
//      both targets; reordered and pre-RoPE keys per token (AttendReorder,
//      AttendRope.cpp), full-precision rows a token per thread;
//   3. softmax statistics per head (max, exp2, sum);
//   4. probabilities times values: the quantized region by the vector
//      forms, the others through KernelTarget::accumulate with channels as
//      lanes (a thread per channel on the GPU).
// The split's (m, l, acc) go to `partial`; the last block of (b, h) to
// finish merges the splits of its heads into `out` (mergeSplits), so that a
// call is one launch.
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"

#include "ChannelTables.h"
#include "kvq/Codegen/Rotation.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

void AttendEmitter::loadQueries() {
  KernelTarget &target = kb.getTarget();
  bool keyNorm = layout.hasKeyNorm(layer);
  ChannelTables keyTables(kb, layout, layers, /*isKeys=*/true, head);
  double scale = model.getSoftmaxScale() * M_LOG2E;
  // Queries in channel order (no RoPE or reorder) are copied 4 channels at a
  // time, and times their key norms: the tile's rows are consecutive, and
  // rows start 16-byte aligned (the runtime requires it of a query on the
  // device; norms rows are D f32).
  if (!rope && !keyTables.hasReorder() && dim % 4 == 0) {
    Type dtype = model.getDtype();
    unsigned quadBytes = dtype.getIntOrFloatBitWidth() / 2;
    Value tileRow =
        kb.add(kb.mul(batch, kb.i32(model.getHeads())), firstQueryHead);
    Value normRow = kb.mul(
        kb.add(kb.mul(slot, kb.i32(model.getKvHeads())), head), kb.i32(dim));
    target.parallelFor(kb, kb.i32(heads * dim / 4), [&](Value i) {
      Value first = kb.mul(i, kb.i32(4));
      Value q = kb.fmul(
          kb.loadFloatVector(dtype, args.q,
                             kb.add(kb.mul(tileRow, kb.i32(dim)), first), 4,
                             /*invariant=*/true, quadBytes),
          kb.splat(kb.f32(scale), 4));
      Value at = kb.mul(kb.toI64(first), kb.i64(4));
      kb.store(q, queries, at, 16);
      if (!keyNorm)
        return;
      Value norm =
          kb.loadFloatVector(kb.builder().getF32Type(), args.norms,
                             kb.add(normRow, kb.remU(first, kb.i32(dim))), 4,
                             /*invariant=*/true, 16);
      kb.store(kb.fmul(q, norm), normQueries, at, 16);
    });
    return;
  }
  target.parallelFor(kb, kb.i32(heads * dim), [&](Value i) {
    Value r = kb.divU(i, kb.i32(dim)), c = kb.remU(i, kb.i32(dim));
    Value hq = kb.add(firstQueryHead, r);
    Value index =
        kb.add(kb.mul(kb.add(kb.mul(batch, kb.i32(model.getHeads())), hq),
                      kb.i32(dim)),
               c);
    auto load = [&](Value channel) {
      return kb.fmul(kb.loadFloat(model.getDtype(), args.q,
                                  kb.add(kb.sub(index, c), channel)),
                     kb.f32(scale));
    };
    Value q = rope ? rope->rotateElement(queryPosition(), c, load) : load(c);
    kb.storeF32(q, queries, i);
    if (normQueries == queries)
      return;
    if (keyNorm) {
      Value norm = kb.loadF32(
          args.norms,
          kb.add(kb.mul(kb.add(kb.mul(slot, kb.i32(model.getKvHeads())), head),
                        kb.i32(dim)),
                 c),
          /*invariant=*/true);
      q = kb.fmul(q, norm);
    }
    // Reordered keys: the query permuted like them.
    Value at = keyTables.hasReorder()
                   ? kb.add(kb.mul(r, kb.i32(dim)), keyTables.positionOf(c))
                   : i;
    kb.storeF32(q, normQueries, at);
  });
}

void AttendEmitter::rotateQueries() {
  if (!isRotated(/*isKeys=*/true))
    return;
  rotateRows(kb, slice(true).quant, dim, heads, RotationDirection::Forward,
             normQueries, [&](Value r, Value c, unsigned lanes) {
               return loadChannels(queries, r, c, lanes);
             });
}

void AttendEmitter::sumQueryGroups() {
  const SliceLayout &keys = slice(true);
  if (!keys.isQuantized() || keys.quant.getSpan() != Span::Channels)
    return;
  unsigned groups = keys.GroupsPerToken, group = keys.quant.getGroup();
  ChannelTables tables(kb, layout, layers, /*isKeys=*/true, head);
  kb.getTarget().parallelFor(kb, kb.i32(heads * groups), [&](Value i) {
    Value first = kb.mul(i, kb.i32(group)), size = kb.i32(group);
    if (tables.hasReorder()) {
      Value g = kb.remU(i, kb.i32(groups));
      first = kb.add(kb.mul(kb.divU(i, kb.i32(groups)), kb.i32(dim)),
                     tables.groupStart(g));
      size = tables.groupSize(g);
    }
    Value sum = kb.forLoop(
        kb.i32(0), size, kb.i32(1), {kb.f32(0)},
        [&](Value k, ValueRange acc) -> SmallVector<Value> {
          return {kb.fadd(acc[0], kb.loadF32(normQueries, kb.add(first, k)))};
        })[0];
    kb.storeF32(sum, groupSums, i);
  });
}

SmallVector<Value> AttendEmitter::fullPrecisionDots(Value buffer,
                                                    Value element0,
                                                    Value queryBuffer) {
  // 16 bytes of the row per load where the target loads rows that wide
  // (TargetInfo::loadBytes); rows start on 16 bytes (head_dim is a multiple
  // of 8 in every shipped model, else element loads).
  Type dtype = model.getDtype();
  unsigned perLoad = 16 / (dtype.getIntOrFloatBitWidth() / 8);
  if (dim % perLoad != 0 || kb.getTarget().getLoadBytes() != 16)
    perLoad = 1;
  SmallVector<Value> init(heads, kb.f32(0));
  return kb.forLoop(
      kb.i32(0), kb.i32(dim), kb.i32(perLoad), init,
      [&](Value c0, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value, 8> keys;
        if (perLoad == 1)
          keys.push_back(kb.loadFloat(dtype, buffer, kb.add(element0, c0),
                                      /*invariant=*/true));
        else
          keys = kb.loadFloats16B(dtype, buffer, kb.add(element0, c0));
        SmallVector<Value> next(acc.begin(), acc.end());
        for (auto [i, k] : llvm::enumerate(keys)) {
          Value c = kb.add(c0, kb.i32(i));
          for (unsigned r = 0; r < heads; ++r)
            next[r] = kb.fadd(next[r], kb.fmul(queryAt(queryBuffer, r, c), k));
        }
        return next;
      });
}

SmallVector<Value> AttendEmitter::reorderedKeyDots(Value index) {
  SliceAccess access(kb, tensor(true), slice(true), layout.pageTokens,
                     args.pages[0], tableRow(true), index, head);
  return reorderedKeyDots(access, kb.remU(index, kb.i32(layout.pageTokens)));
}

void AttendEmitter::scoreRange(Range range, unsigned region) {
  const TensorLayout &keys = tensor(true);
  if (region == 1)
    switch (forms.getKeys()) {
    case KeyForm::Rows:
      return scoreFullPrecisionRows(range);
    case KeyForm::TokenBlocksMatrix:
      return scoreTokenBlocksOnMatrix(range);
    case KeyForm::ChannelGroupsMatrix:
      return scoreChannelGroupsOnMatrix(range);
    case KeyForm::ChannelGroupsI16:
      return scoreChannelGroupsOnI16(range);
    case KeyForm::TokenBlocks:
    case KeyForm::TokenBlocksI16:
      return scoreTokenBlocks(range);
    case KeyForm::ChannelGroups:
      return scoreChannelGroups(range);
    case KeyForm::Reordered:
    case KeyForm::PreRope:
      break; // Token by token, below.
    }
  Value count = kb.sub(range.end, range.begin);
  kb.getTarget().parallelFor(kb, count, [&](Value i) {
    Value t = kb.add(range.begin, i);
    SmallVector<Value> dots;
    if (rope) {
      dots = rotatedKeyDots(region, t);
    } else if (region == 0) {
      Value row =
          fullPrecisionRow(kb, model, keys.window.getSink(), slot, t, head);
      dots = fullPrecisionDots(args.sink[0], row, queries);
    } else if (region == 1) {
      dots = reorderedKeyDots(kb.sub(t, regions[0].sink));
    } else {
      Value w = kb.sub(t, kb.add(regions[0].sink, regions[0].quantized));
      dots =
          fullPrecisionDots(args.window[0], windowTokenRow(true, w), queries);
    }
    Value local = kb.sub(t, splitRange.begin);
    for (unsigned r = 0; r < heads; ++r)
      kb.storeF32(dots[r], scores, kb.add(kb.i32(r * splitTokens), local));
  });
}

void AttendEmitter::softmax() {
  KernelTarget &target = kb.getTarget();
  Value count = kb.sub(splitRange.end, splitRange.begin);
  // A split of masked tokens only (OTT) has max -inf: its weights are 0.
  auto shiftOf = [&](Value m) {
    return hasPool() ? kb.select(kb.feq(m, kb.f32(-INFINITY)), kb.f32(0), m)
                     : m;
  };
  auto rowOf = [&](Value r) {
    return kb.gep(scores, kb.mul(kb.toI64(r), kb.i64(splitTokens * 4)));
  };
  if (target.getBlockThreads() == 1) {
    for (unsigned r = 0; r < heads; ++r) {
      Value row = rowOf(kb.i32(r));
      Value m = target.reduce(kb, ReduceKind::Max, row, count);
      Value shift = shiftOf(m);
      target.parallelFor(kb, count, [&](Value i) {
        kb.storeF32(kb.exp2(kb.fsub(kb.loadF32(row, i), shift)), row, i);
      });
      maxScore.push_back(m);
      sumExp.push_back(target.reduce(kb, ReduceKind::Sum, row, count));
    }
    return;
  }
  // A block: each head is a task of a warp's workers, which take every
  // workers-th group of 4 tokens (one 128-bit access), then the tail one by
  // one, and combine their maxima and sums by shuffles, all heads at once
  // instead of a block-wide reduction each.
  unsigned workers = getWorkers(target, heads, splitTokens);
  unsigned width = splitTokens % 4 == 0 ? 4 : 1;
  Value stats = target.allocShared(kb, heads * 2 * 4);
  Type f32 = kb.builder().getF32Type();
  auto lanesOf = [&](Value v) {
    SmallVector<Value> lanes;
    for (unsigned j = 0; j < width; ++j)
      lanes.push_back(vector::ExtractOp::create(kb.builder(), kb.getLoc(), v,
                                                ArrayRef<int64_t>{j}));
    return lanes;
  };
  forEachWorker(heads, workers, [&](Value r, Value worker) {
    Value valid = kb.ult(r, kb.i32(heads));
    Value row = rowOf(kb.select(valid, r, kb.i32(0)));
    Value end = kb.select(valid, count, kb.i32(0));
    Value groups = kb.divU(end, kb.i32(width));
    Value tail = kb.mul(groups, kb.i32(width));
    Value step = kb.i32(workers);
    auto groupAt = [&](Value g) {
      return kb.mul(kb.toI64(g), kb.i64(4 * width));
    };
    auto vectorType = VectorType::get({width}, f32);
    // Maxima: the groups, then the tail.
    Value m = kb.forLoop(
        worker, groups, step, {kb.f32(-INFINITY)},
        [&](Value g, ValueRange acc) -> SmallVector<Value> {
          Value m = acc[0];
          for (Value x : lanesOf(kb.load(vectorType, row, groupAt(g), 16)))
            m = kb.runningMax(m, x);
          return {m};
        })[0];
    m = kb.forLoop(kb.add(tail, worker), end, step, {m},
                   [&](Value i, ValueRange acc) -> SmallVector<Value> {
                     return {kb.runningMax(acc[0], kb.loadF32(row, i))};
                   })[0];
    m = target.reduceAcrossWorkers(kb, ReduceKind::Max, m, workers)[0];
    Value shift = shiftOf(m);
    // Weights 2^(s - shift), stored in place, and their sum.
    Value sum = kb.forLoop(
        worker, groups, step, {kb.splat(kb.f32(0), width)},
        [&](Value g, ValueRange acc) -> SmallVector<Value> {
          Value p = kb.exp2(kb.fsub(kb.load(vectorType, row, groupAt(g), 16),
                                    kb.splat(shift, width)));
          kb.store(p, row, groupAt(g), 16);
          return {kb.fadd(acc[0], p)};
        })[0];
    sum = kb.forLoop(kb.add(tail, worker), end, step, {kb.reduceAdd(sum)},
                     [&](Value i, ValueRange acc) -> SmallVector<Value> {
                       Value p = kb.exp2(kb.fsub(kb.loadF32(row, i), shift));
                       kb.storeF32(p, row, i);
                       return {kb.fadd(acc[0], p)};
                     })[0];
    sum = target.sumAcrossWorkers(kb, sum, workers)[0];
    kb.ifThen(kb.bitAnd(valid, kb.eq(worker, kb.i32(0))), [&] {
      kb.storeF32(m, stats, kb.mul(r, kb.i32(2)));
      kb.storeF32(sum, stats, kb.add(kb.mul(r, kb.i32(2)), kb.i32(1)));
    });
  });
  for (unsigned r = 0; r < heads; ++r) {
    maxScore.push_back(kb.loadF32(stats, kb.i32(2 * r)));
    sumExp.push_back(kb.loadF32(stats, kb.i32(2 * r + 1)));
  }
}

Value AttendEmitter::valueAt(unsigned region, Value t, Value c) {
  const TensorLayout &values = tensor(false);
  if (region == 3)
    return poolValueAt(t, c);
  if (region != 1) {
    bool isSink = region == 0;
    Value token =
        isSink ? t : kb.sub(t, kb.add(regions[1].sink, regions[1].quantized));
    Value row = isSink ? fullPrecisionRow(kb, model, values.window.getSink(),
                                          slot, token, head)
                       : windowTokenRow(false, token);
    Value buffer = isSink ? args.sink[1] : args.window[1];
    return kb.loadFloat(model.getDtype(), buffer, kb.add(row, c),
                        /*invariant=*/true);
  }
  const SliceLayout &slice = this->slice(false);
  Value index = kb.sub(t, regions[1].sink);
  SliceAccess access(kb, values, slice, layout.pageTokens, args.pages[1],
                     tableRow(false), index, head);
  Value pageToken = kb.remU(index, kb.i32(layout.pageTokens));
  if (!slice.isQuantized())
    return kb.loadFloat(model.getDtype(), access.getBase(),
                        kb.add(kb.mul(pageToken, kb.i32(dim)), c),
                        /*invariant=*/true);
  return dequantizeAt(access, /*isKeys=*/false, pageToken, c);
}

Value AttendEmitter::dequantizeAt(SliceAccess &access, bool isKeys,
                                  Value pageToken, Value c) {
  const SliceLayout &slice = this->slice(isKeys);
  if (slice.hasReorder())
    return reorderedAt(access, isKeys, pageToken, c);
  QuantAttr quant = slice.quant;
  Quantizer quantizer(kb, quant);
  unsigned group = quant.getGroup();
  Value n, k;
  if (quant.getSpan() == Span::Channels) {
    n = kb.add(kb.mul(pageToken, kb.i32(slice.GroupsPerToken)),
               kb.divU(c, kb.i32(group)));
    k = kb.remU(c, kb.i32(group));
  } else {
    n = kb.add(kb.mul(kb.divU(pageToken, kb.i32(group)), kb.i32(dim)), c);
    k = kb.remU(pageToken, kb.i32(group));
  }
  return DequantizeOp::create(kb.builder(), kb.getLoc(),
                              kb.builder().getF32Type(), access.loadCode(n, k),
                              access.loadScale(quantizer, n),
                              access.loadZero(quantizer, n), quant);
}

void AttendEmitter::accumulateValues() {
  Value sinkEnd = regions[1].sink;
  Value quantEnd = kb.add(sinkEnd, regions[1].quantized);
  Range ranges[3] = {clip(splitRange, kb.i32(0), sinkEnd),
                     clip(splitRange, sinkEnd, quantEnd),
                     clip(splitRange, quantEnd, tokens)};
  // One step per value region, so that no step branches per token.
  auto stepFor = [&](unsigned region) {
    return [this, region](Value t, Value c,
                          ValueRange sums) -> SmallVector<Value> {
      Value v = valueAt(region, t, c);
      Value local = kb.sub(t, splitRange.begin);
      SmallVector<Value> next;
      for (unsigned r = 0; r < heads; ++r) {
        Value p = kb.loadF32(scores, kb.add(kb.i32(r * splitTokens), local));
        next.push_back(kb.fadd(sums[r], kb.fmul(p, v)));
      }
      return next;
    };
  };
  auto sink = stepFor(0), quantized = stepFor(1), window = stepFor(2),
       pool = stepFor(3);
  SmallVector<std::pair<Range, KernelTarget::AccumulateStep>> steps = {
      {ranges[0], sink}, {ranges[1], quantized}, {ranges[2], window}};
  if (hasPool())
    steps.push_back({clip(splitRange, tokens, poolEnd), pool});
  // The vector forms sum the sinks, the pages and the window first.
  assert((valueSums || !isRotated(/*isKeys=*/false)) &&
         "rotated values are never reordered: they have vector sums");
  if (valueSums) {
    sumQuantizedValues(ranges[1]);
    // Rotated values: the quantized sums back to the channels the sinks and
    // the window are in.
    if (isRotated(/*isKeys=*/false))
      rotateRows(kb, slice(false).quant, dim, heads, RotationDirection::Inverse,
                 valueSums, [&](Value r, Value c, unsigned lanes) {
                   return loadChannels(valueSums, r, c, lanes);
                 });
    // Most splits have no sink or window tokens (a block-uniform test).
    for (unsigned region : {0u, 2u})
      kb.ifThen(kb.ult(ranges[region].begin, ranges[region].end),
                [&] { sumFullPrecisionValues(ranges[region], region); });
    steps.erase(steps.begin(), steps.begin() + 3);
  }
  unsigned stride = dim + 2;
  // The outputs are stored normalised (getPartialOutputType); an empty
  // split (l = 0) stores zeros.
  Type outputType = getPartialOutputType(layout, kb.builder().getContext());
  SmallVector<Value> inverseSum;
  for (unsigned r = 0; r < heads; ++r)
    inverseSum.push_back(inverseOrZero(kb, sumExp[r]));
  kb.getTarget().accumulate(
      kb, kb.i32(dim), dim, heads, /*unroll=*/4, steps,
      [&](Value c, ValueRange sums) {
        SmallVector<Value> acc(sums.begin(), sums.end());
        if (valueSums)
          for (unsigned r = 0; r < heads; ++r)
            acc[r] = kb.fadd(acc[r], queryAt(valueSums, r, c));
        for (unsigned r = 0; r < heads; ++r) {
          Value hq = kb.add(firstQueryHead, kb.i32(r));
          Value row = kb.add(kb.mul(batch, kb.i32(model.getHeads())), hq);
          Value first = kb.mul(kb.add(kb.mul(row, args.numSplits), split),
                               kb.i32(stride));
          Value output = kb.fmul(acc[r], inverseSum[r]);
          if (!outputType.isF32())
            output = arith::TruncFOp::create(kb.builder(), kb.getLoc(),
                                             outputType, output);
          unsigned bytes = outputType.getIntOrFloatBitWidth() / 8;
          kb.store(output, getPartialOutputs(kb, args.partial, first),
                   kb.mul(kb.toI64(c), kb.i64(bytes)), bytes);
          kb.ifThen(kb.eq(c, kb.i32(0)), [&] {
            kb.storeF32(maxScore[r], args.partial, first);
            kb.storeF32(sumExp[r], args.partial, kb.add(first, kb.i32(1)));
          });
        }
      });
}

void AttendEmitter::emit() {
  using F = abi::SeqsFields;
  slot = descriptor(F::Slot);
  tokens = descriptor(F::Tokens);
  regions[0] = {descriptor(F::KSink), descriptor(F::KQuantized),
                descriptor(F::KWindowHead)};
  regions[1] = {descriptor(F::VSink), descriptor(F::VQuantized),
                descriptor(F::VWindowHead)};
  // The planned split size: at most splitTokens (the buffers'
  // capacity), a multiple of layout.splitGranule.
  Value begin = kb.mul(split, args.splitTokens);
  Value end = kb.add(begin, args.splitTokens);
  poolEnd = hasPool() ? kb.add(tokens, countPoolEntries()) : tokens;
  // A split past the sequence's end is empty: [begin, begin).
  splitRange = clip({begin, end}, kb.i32(0), poolEnd);
  prefetchSplit();
  // Block-local buffers are sized for one tile and reused by every tile.
  KernelTarget &target = kb.getTarget();
  scores = target.allocShared(kb, heads * splitTokens * 4);
  queries = target.allocShared(kb, heads * dim * 4);
  const SliceLayout &keys = slice(true);
  normQueries = layout.hasKeyNorm(layer) || keys.hasReorder() ||
                        isRotated(/*isKeys=*/true)
                    ? target.allocShared(kb, heads * dim * 4)
                    : queries;
  if (keys.isQuantized() && keys.quant.getSpan() == Span::Channels)
    groupSums = target.allocShared(kb, heads * keys.GroupsPerToken * 4);
  allocateVectorBuffers();
  if (RopeAttr preRope =
          keys.isQuantized() ? keys.quant.getPreRope() : RopeAttr()) {
    rope.emplace(kb, preRope);
    rope->allocateFrequencies();
  }
  Value firstHead = kb.mul(head, kb.i32(ratio));
  unsigned tiles = ratio / heads;
  if (tiles == 1) {
    firstQueryHead = firstHead;
    attendTile();
  } else {
    kb.forEach(kb.i32(0), kb.i32(tiles), [&](Value tile) {
      firstQueryHead = kb.add(firstHead, kb.mul(tile, kb.i32(heads)));
      attendTile();
    });
  }
  mergeIfLast(firstHead);
}

void AttendEmitter::mergeIfLast(Value firstHead) {
  // Blocks (s, h, b) for every split s count themselves at arrivals[b][h].
  Value counter = kb.gep(
      args.arrivals,
      kb.mul(kb.toI64(kb.add(kb.mul(batch, kb.i32(model.getKvHeads())), head)),
             kb.i64(4)));
  Value last = kb.getTarget().arriveLast(kb, counter, args.numSplits);
  kb.ifThen(last, [&] {
    Value firstRow = kb.add(kb.mul(batch, kb.i32(model.getHeads())), firstHead);
    mergeSplits(kb, layout, args.partial, args.out, args.numSplits, firstRow,
                ratio);
  });
}

/// Phases 1-4 for the query heads [firstQueryHead, firstQueryHead + heads).
void AttendEmitter::attendTile() {
  maxScore.clear();
  sumExp.clear();
  loadQueries();
  rotateQueries();
  sumQueryGroups();
  Value sinkEnd = regions[0].sink;
  Value quantEnd = kb.add(sinkEnd, regions[0].quantized);
  scoreRange(clip(splitRange, kb.i32(0), sinkEnd), 0);
  scoreRange(clip(splitRange, sinkEnd, quantEnd), 1);
  scoreRange(clip(splitRange, quantEnd, tokens), 2);
  if (hasPool()) {
    scorePool(clip(splitRange, tokens, poolEnd));
    maskPooledTokens();
  }
  softmax();
  accumulateValues();
}

void kvq::emitAttendKernel(KernelBuilder &kb, const KernelEntry &entry,
                           const CacheLayout &layout, ArrayRef<int64_t> layers,
                           AttendFormsAttr forms) {
  assert(forms && "the attend kernel's forms come from kvq-select-forms");
  kb.setReassociate(true);
  AttendEmitter(kb, entry, layout, layers, forms).emit();
}
