//===- AttendEmitter.h - the attend kernel's emitter ------------*- C++ -*-===//
//
// Private to lib/Kernels: the phases of the attend kernel (AttendKernel.cpp)
// and the vector forms of its quantized loops (AttendVector.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LIB_KERNELS_ATTENDEMITTER_H
#define KVQ_CODEGEN_LIB_KERNELS_ATTENDEMITTER_H

#include "kvq/Codegen/IntegerFactors.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

#include "Rope.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace kvq {
namespace attend {

using llvm::SmallVector;
using mlir::Value;
using mlir::ValueRange;

/// The arguments of kvq/ABI/KernelABI.h; pairs are (keys, values).
struct AttendArgs {
  using A = abi::AttendArgs;
  Value q, partial, out, arrivals, seqs, pages[2], tables[2], sink[2],
      window[2], norms;
  Value maxPages, numSplits, splitTokens, pool[2], poolIndex, rotateQuery,
      prefetchSplit, tableRow;
  explicit AttendArgs(const KernelEntry &e)
      : q(e.args[A::Q]), partial(e.args[A::Partial]), out(e.args[A::Out]),
        arrivals(e.args[A::Arrivals]),
        seqs(e.args[A::Seqs]), pages{e.args[A::KPages], e.args[A::VPages]},
        tables{e.args[A::KTables], e.args[A::VTables]}, sink{e.args[A::KSink],
                                                             e.args[A::VSink]},
        window{e.args[A::KWindow], e.args[A::VWindow]}, norms(e.args[A::Norms]),
        maxPages(e.args[A::MaxPagesPerSeq]), numSplits(e.args[A::NumSplits]),
        splitTokens(e.args[A::SplitTokens]), pool{e.args[A::KPool],
                                                  e.args[A::VPool]},
        poolIndex(e.args[A::PoolIndex]), rotateQuery(e.args[A::RotateQuery]),
        prefetchSplit(e.args[A::PrefetchSplit]), tableRow(e.args[A::TableRow]) {
  }
};

/// Token counts of one tensor of the sequence: [0, sink) are sink tokens,
/// [sink, sink + quantized) quantized, the rest in the window, whose oldest
/// token is at ring row windowHead.
struct Regions {
  Value sink, quantized, windowHead;
};

using Range = IndexRange;

/// Element `index` of an f32 buffer as a pointer, from which loads at
/// constant element offsets (loadF32At) fold into the load's address: the
/// heads' rows of a buffer cost one address per token, not one per head.
inline Value f32Row(KernelBuilder &kb, Value buffer, Value index) {
  return kb.gep(buffer, kb.mul(kb.toI64(index), kb.i64(4)));
}

/// Tokens of a block of the i16 value form (AttendI16.cpp): their i32
/// sums go to f32 once a block, and their weights share a scale.
constexpr unsigned kValueBlockTokens = 32;

inline Value vectorF32(KernelBuilder &kb, unsigned lanes, double value) {
  return kb.splat(kb.f32(value), lanes);
}

/// `lanes` f32 elements of `ptr` from element `index`.
inline Value loadVectorF32(KernelBuilder &kb, Value ptr, Value index,
                           unsigned lanes) {
  return kb.loadFloatVector(kb.builder().getF32Type(), ptr, index, lanes);
}

inline void storeVectorF32(KernelBuilder &kb, Value value, Value ptr,
                           Value index) {
  kb.store(value, ptr, kb.mul(kb.toI64(index), kb.i64(4)), 4);
}

inline Value loadF32At(KernelBuilder &kb, Value row, unsigned element) {
  return kb.load(kb.builder().getF32Type(), row, kb.i64(int64_t(element) * 4),
                 4);
}

/// Lane `i` of vector `v`; `v` itself for a scalar (a count of 1).
inline Value laneOf(KernelBuilder &kb, Value v, int64_t i) {
  if (!mlir::isa<mlir::VectorType>(v.getType()))
    return v;
  return mlir::vector::ExtractOp::create(kb.builder(), kb.getLoc(), v,
                                         llvm::ArrayRef<int64_t>{i});
}

/// The warps of a block (its threads over the widest group of workers).
inline unsigned getWarps(const KernelTarget &target) {
  return target.getBlockThreads() / target.getMaxWorkers();
}

/// The largest power of two of workers for `tasks` tasks such that they fit
/// in one round of the block's threads, at most the target's, and dividing
/// `divides` (the iterations the workers share).
inline unsigned getWorkers(const KernelTarget &target, unsigned tasks,
                           unsigned divides) {
  unsigned workers = 1;
  while (workers * 2 <= target.getMaxWorkers() &&
         tasks * workers * 2 <= target.getBlockThreads() &&
         divides % (workers * 2) == 0)
    workers *= 2;
  return workers;
}

/// Heads and chunks of `lanes` channels per pass of a value loop over
/// `heads` heads (chunks of a group: `groupChunks`), as many as keep
/// accumulators in registers.
std::pair<unsigned, unsigned> planValuePasses(const TargetInfo &info,
                                              unsigned heads, unsigned chunks,
                                              unsigned groupChunks);

/// Whether a slice holds 3-bit codes in 32-code fields (3 words a field):
/// the 3-bit matrix forms' codes.
inline bool hasFieldCodes(const SliceLayout &slice) {
  QuantAttr quant = slice.quant;
  return quant.getBits() == 3 && quant.getGroup() % 32 == 0 &&
         slice.WordsPerGroup * 32 == quant.getGroup() * 3;
}

/// A thread of the block as the matrix unit's fragments see it: its warp,
/// its groupID g and threadID_in_group t in the warp, and the head of B's
/// column g (g, or the last head for columns past the tile's heads: never
/// stored, they read that head's data instead of past it).
struct FragmentThread {
  Value warp, g, t, headOfB;
};

class AttendEmitter {
public:
  AttendEmitter(KernelBuilder &kb, const KernelEntry &entry,
                const CacheLayout &layout, llvm::ArrayRef<int64_t> layers,
                AttendFormsAttr forms)
      : kb(kb), args(entry), layout(layout), forms(forms),
        model(layout.model), layers{layers, args.tableRow},
        layer(this->layers.first()), split(entry.blockId[0]),
        head(entry.blockId[1]), batch(entry.blockId[2]),
        ratio(model.getGroupRatio()), heads(getAttendTileHeads(ratio)),
        dim(model.getHeadDim()),
        splitTokens(kb.getTarget().getSplitTokens(layout)) {}

  void emit();

private:
  const TensorLayout &tensor(bool isKeys) { return layout.get(isKeys); }
  const SliceLayout &slice(bool isKeys) { return tensor(isKeys).layers[layer]; }
  /// Field `field` (abi::SeqsFields) of the sequence's `seqs` row.
  Value descriptor(unsigned field) {
    return kb.loadU32(args.seqs,
                      kb.add(kb.mul(batch, kb.i32(abi::SeqsFields::NumFields)),
                             kb.i32(field)),
                      /*invariant=*/true);
  }
  /// Element offset of channel 0 of window token `w` of kv-head `head` in
  /// the keys' or values' window rings.
  Value windowTokenRow(bool isKeys, Value w) {
    return windowElement(kb, model, tensor(isKeys).windowCapacity, slot,
                         regions[isKeys ? 0 : 1].windowHead, w, head);
  }
  /// The part of `range` inside [lo, hi).
  Range clip(Range range, Value lo, Value hi) {
    Value begin = kb.maxS(range.begin, lo);
    Value end = kb.maxS(kb.select(kb.ult(hi, range.end), hi, range.end), begin);
    return {begin, end};
  }
  /// Whether token `t` lies in `range` (one unsigned comparison).
  Value contains(Range range, Value t) {
    return kb.ult(kb.sub(t, range.begin), kb.sub(range.end, range.begin));
  }
  /// Whether tokens [begin, begin + count) all lie in `range`.
  Value covers(Range range, Value begin, unsigned count) {
    Value before = kb.ult(begin, range.begin);
    Value after = kb.ult(range.end, kb.add(begin, kb.i32(count)));
    return kb.eq(kb.bitOr(before, after), kb.i1(false));
  }
  Value tableRow(bool isKeys) {
    Value offset = kb.mul(kb.toI64(kb.mul(slot, args.maxPages)), kb.i64(4));
    return kb.gep(args.tables[isKeys ? 0 : 1], offset);
  }
  Value queryAt(Value buffer, unsigned r, Value c) {
    return kb.loadF32(buffer, kb.add(kb.i32(r * dim), c));
  }

  void loadQueries();
  /// Whether the keys' (values') quantized rows are rotated (`rotate =
  /// hadamard`).
  bool isRotated(bool isKeys) {
    const SliceLayout &s = slice(isKeys);
    return s.isQuantized() && s.quant.isRotated();
  }
  /// `lanes` channels from channel `c` of row `r` of a buffer of the heads'
  /// rows (queries, valueSums): a scalar for one lane, else a vector.
  Value loadChannels(Value buffer, Value r, Value c, unsigned lanes) {
    Value index = kb.add(kb.mul(r, kb.i32(dim)), c);
    return lanes == 1 ? kb.loadF32(buffer, index)
                      : loadVectorF32(kb, buffer, index, lanes);
  }
  /// Rotated keys: normQueries = R queries, which the quantized keys meet
  /// (docs/Numerics.md, "Hadamard rotation").
  void rotateQueries();
  void sumQueryGroups();
  Value groupSum(unsigned r, Value g) {
    return kb.loadF32(groupSums,
                      kb.add(kb.i32(r * slice(true).GroupsPerToken), g));
  }
  void scoreRange(Range range, unsigned region);
  // The vector forms of the quantized loops (AttendVector.cpp).
  void scoreTokenBlocks(Range range);
  void scoreChannelGroups(Range range);
  /// span=channels keys: `count` group sums of head r's query from group g.
  Value groupSumsOf(unsigned r, Value g, unsigned count);
  /// span=channels keys: head r's `offsets` (one per group) times its
  /// query's group sums, in lanes [0, groups) of a vector of `lanes` (at
  /// least the groups), the other lanes 0.
  Value groupBiasLanes(Value offsets, unsigned r, unsigned lanes);
  void allocateVectorBuffers();
  void sumQuantizedValues(Range range);
  void sumChannelGroupValues(Range range);
  /// Heads [firstHead, firstHead + heads) and chunks of `lanes` channels
  /// [firstChunk, firstChunk + chunks) of a token's values: whole groups, or
  /// part of one.
  struct ValuePass {
    unsigned firstHead, heads;
    Value firstChunk;
    unsigned chunks;
  };
  void sumChannelGroupPass(Range range, Quantizer &quantizer,
                           const ValuePass &pass, Value unit, unsigned units,
                           Value worker, unsigned workers);
  void sumTokenBlockValues(Range range);
  // The i16 forms (AttendI16.cpp), where the target has i16 pair dots.
  /// Whether span=tokens keys are scored on 16-bit integer pair dots: the
  /// folded queries rounded to i16 per block and head (docs/Numerics.md,
  /// "Attention on integer dots").
  bool scoresKeysOnI16Dots() const {
    return forms.getKeys() == KeyForm::TokenBlocksI16;
  }
  /// The i16 form's: pairQueries and blockQueryScales of key block `b`
  /// from its folded queries (at f32 element `rows`) and each head's
  /// largest magnitude among them.
  void roundFoldedQueries(Value b, Value rows, llvm::ArrayRef<Value> maxima);
  /// The i16 form's dots of `count` chunks of `lanes` tokens (from chunk
  /// `chunk0`) of key block `b` with channels [c0, c0 + channels), as f32.
  SmallVector<Value> blockDotsOnI16(SliceAccess &access, Value b,
                                    Value pageBlock, unsigned chunk0,
                                    unsigned count, Value c0,
                                    unsigned channels);
  /// Whether span=channels keys are scored on 16-bit integer pair dots: the
  /// normalised queries rounded to i16 per head.
  bool scoresChannelKeysOnI16Dots() const {
    return forms.getKeys() == KeyForm::ChannelGroupsI16;
  }
  void scoreChannelGroupsOnI16(Range range);
  /// Whether span=channels values are summed on 16-bit integer pair dots:
  /// the weights rounded to i16 per 32-token block, head and group.
  bool sumsValuesOnI16Dots() const {
    return forms.getValues() == ValueForm::ChannelGroupsI16;
  }
  void sumChannelGroupValuesOnI16(Range range);
  /// The i16 value form's pairWeights, pairWeightScales and
  /// roundedPairWeights of the block at quantized position `blockStart`
  /// (its tokens outside `tokens` weigh 0); adds each head's p * offset to
  /// `sums`. Returns the block's first token in its page.
  Value roundBlockWeights(SliceAccess &access, Quantizer &quantizer,
                          Value blockStart, Range tokens,
                          SmallVector<Value> &sums);
  /// One pass's share of a block: its i32 sums, then valueSums += them
  /// times the block's scales.
  void sumBlockPassOnI16(SliceAccess &access, Value pageToken0,
                         const ValuePass &pass);
  /// Whether span=tokens values are summed on 16-bit integer pair dots: a
  /// block's weights p rounded to i16 per head.
  bool sumsBlockValuesOnI16Dots() const {
    return forms.getValues() == ValueForm::TokenBlocksI16;
  }
  /// Each head's sum over block `b`'s tokens of p times the codes of a
  /// chunk of channels (`packed`: their streams, one after another), as
  /// f32.
  SmallVector<Value> blockValueDotsOnI16(Value packed, Value b);
  // The matrix forms (AttendMatrix.cpp), where the target has a matrix unit.
  /// Whether span=channels values are summed on the matrix unit.
  bool sumsValuesOnMatrix() const {
    return forms.getValues() == ValueForm::ChannelGroupsMatrix;
  }
  void sumChannelGroupValuesOnMatrix(Range range);
  /// Whether span=tokens keys are scored on the matrix unit.
  bool scoresKeysOnMatrix() const {
    return forms.getKeys() == KeyForm::TokenBlocksMatrix;
  }
  void scoreTokenBlocksOnMatrix(Range range);
  /// Whether span=tokens values of 3 bits are summed on the matrix unit.
  bool sumsBlockValuesOnMatrix() const {
    return forms.getValues() == ValueForm::TokenBlocksMatrix;
  }
  void sumTokenBlockValuesOnMatrix(Range range);
  /// Stores a warp's share of valueSums (matrixPartials) for C's columns
  /// 2t and 2t + 1: the thread's `rowChannels` channels from `rowChannel0`,
  /// channel c of column j being valueAt(c, j).
  void storeMatrixShare(
      const FragmentThread &thread, Value rowChannel0, unsigned rowChannels,
      llvm::function_ref<Value(unsigned channel, unsigned column)> valueAt);
  /// valueSums: the sum of the warps' shares.
  void addMatrixShares();
  /// Whether span=channels keys of 3 bits are scored on the matrix unit.
  bool scoresChannelKeysOnMatrix() const {
    return forms.getKeys() == KeyForm::ChannelGroupsMatrix;
  }
  void scoreChannelGroupsOnMatrix(Range range);
  /// Whether a matrix form reads the keys' (values') quantized pages.
  bool readsOnMatrix(bool isKeys);
  /// On targets that prefetch splits (KernelTarget::prefetchesSplits): the
  /// block asks for the quantized pages its matrix forms will read.
  void prefetchSplit();
  struct SplitLines;
  /// The 64-byte lines of the split's codes and parameters of the keys
  /// (values), and line `i` of them.
  SplitLines getSplitLines(bool isKeys);
  void prefetchSplitLine(const SplitLines &lines, Value i);
  /// Stores `count` f32 values of `from` at `to` as split halves, each 8 in
  /// the order of a thread's 3-bit field (AttendMatrix.cpp).
  void storeFieldOrdered(Value from, Value to, unsigned count);
  /// Stores f32 `values` (a vector of a multiple of 4) from f32 element
  /// `index` of `buffer` as the matrix unit's split halves: per 4 values,
  /// two f16x2 words of their rounding, then two of the residuals.
  void storeSplitHalves(Value values, Value buffer, Value index);
  /// planValuePasses for this target and tile.
  std::pair<unsigned, unsigned> planValuePasses(unsigned chunks,
                                                unsigned groupChunks) {
    return attend::planValuePasses(kb.getTarget().getInfo(), heads, chunks,
                                   groupChunks);
  }
  // Full-precision pages (fp16 caches and layers).
  void scoreFullPrecisionRows(Range range);
  /// valueSums from the full-precision rows of `range` in region 1
  /// (pages), or plus those of region 0 (sinks) or 2 (the window).
  void sumFullPrecisionValues(Range range, unsigned region);
  /// `lanes` channels of a full-precision page row from `element`, as f32.
  Value loadRowChunk(Value base, Value element, unsigned lanes);
  /// Runs `body(task, worker)` for `tasks` tasks of `workers` adjacent
  /// workers (KernelTarget::sumAcrossWorkers) over the block's threads.
  /// Padded tasks (task >= tasks) run too and must do nothing.
  void forEachWorker(unsigned tasks, unsigned workers,
                     llvm::function_ref<void(Value task, Value worker)> body);
  /// The same for a number of tasks known at run time (a split's blocks:
  /// its size is planned by the runtime), padded there.
  void forEachWorker(Value tasks, unsigned workers,
                     llvm::function_ref<void(Value task, Value worker)> body);
  /// The loop of both: `count` padded iterations, split into (task, worker).
  void
  forEachIteration(Value count, unsigned workers,
                   llvm::function_ref<void(Value task, Value worker)> body);
  /// forEachWorker on a GPU block; on one thread, the units unrolled with
  /// constant indices (worker 0).
  void forEachUnit(unsigned units, unsigned workers,
                   llvm::function_ref<void(Value unit, Value worker)> body);
  /// `lanes` codes of `bits` bits from the words vector `words`, lane j at
  /// bit `offset + j * stride`, as f32.
  Value unpackCodes(Value words, unsigned bits, unsigned lanes, unsigned offset,
                    unsigned stride);
  /// Loads `count` packed words of group `n` as one vector.
  Value loadGroupWords(SliceAccess &access, Value n, unsigned count);
  /// The `count` bits of the slice's codes from bit `bit` of word `word`
  /// as words whose bit 0 is that bit (`bit` may be dynamic).
  Value loadCodeBits(SliceAccess &access, Value word, Value bit,
                     unsigned count);
  using TokenStep = std::function<SmallVector<Value>(
      SliceAccess &access, Value pageToken, Value t, ValueRange sums)>;
  /// A step over `tokens` consecutive tokens of one page, from the token
  /// it is given.
  struct TokenBatch {
    unsigned tokens = 1;
    TokenStep step;
  };
  /// Runs `step(access, pageToken, t, sums)` for every token t of `range`
  /// (quantized region of keys or values) in order, with `access` the
  /// token's page slice; returns the final sums. Worker `worker` of
  /// `workers` takes every workers-th token. With a `batch` (one worker),
  /// its step takes a page's tokens while it has that many left, `step`
  /// the rest.
  SmallVector<Value> forEachQuantizedToken(Range range, bool isKeys,
                                           ValueRange init,
                                           const TokenStep &step,
                                           Value worker = {},
                                           unsigned workers = 1,
                                           const TokenBatch *batch = nullptr);
  /// forEachQuantizedToken over the keys of `range`, the tokens spread over
  /// the block's threads.
  void forEachTokenOfThreads(Range range, const TokenStep &step,
                             const TokenBatch *batch = nullptr);
  /// Stores each head's score for token t: the sum of the lanes of its
  /// `dots`, plus its bias where `biases` is not empty.
  void storeScores(Value t, llvm::ArrayRef<Value> dots,
                   llvm::ArrayRef<Value> biases);
  /// Stores each head's scores (`values`, one a head): token t's as a
  /// scalar, or the tokens' from t on as a vector.
  void storeScoreValues(Value t, llvm::ArrayRef<Value> values);
  /// The span=tokens blocks overlapping a range: the first block's index
  /// among the quantized positions, their count, and its bound per split.
  struct TokenBlocks {
    Value first, count;
    unsigned max;
  };
  unsigned getMaxTokenBlocks(bool isKeys);
  /// On targets that prefetch pages (KernelTarget::prefetchesPages), the
  /// slice of the page after `page`, or of `lastPage` if that is `page`.
  std::optional<SliceAccess> getNextPage(bool isKeys, Value page,
                                         Value lastPage);
  /// Prefetches the share of `tokens` tokens from `pageToken` of `next`.
  void prefetchTokens(const SliceAccess &next, Value pageToken,
                      unsigned tokens);
  /// Block b's share of the next page (where the target prefetches).
  void prefetchNextPage(bool isKeys, const TokenBlocks &blocks, Value b);
  /// Where the target prefetches pages: the key parameters foldBlockQueries
  /// reads a page after block b's.
  void prefetchBlockTerms(const TokenBlocks &blocks, Value b);
  TokenBlocks getTokenBlocks(Range range, bool isKeys);
  /// The page slice of the block at quantized position `first`.
  SliceAccess getBlockAccess(bool isKeys, Value first);
  /// The index in its page of the span=tokens block at quantized position
  /// `first`.
  Value getPageBlock(Value first, unsigned group);
  /// The slopes and offsets (Quantizer::affine) of channels [c0, c0 +
  /// lanes) of the span=tokens block at `first`.
  AffineTerms loadBlockTerms(SliceAccess &access, Quantizer &quantizer,
                             Value first, Value c0, unsigned lanes);
  /// foldedQueries and blockBiases of every key block.
  void foldBlockQueries(const TokenBlocks &blocks, Quantizer &quantizer);
  /// blockWeights and blockWeightSums of every value block.
  void loadBlockWeights(Range range, const TokenBlocks &blocks);
  /// The i16 form's roundedBlockWeights and blockWeightScales of every
  /// value block, from blockWeights.
  void roundBlockValueWeights(const TokenBlocks &blocks);
  /// The matrix form's: matrixWeights and blockWeightSums.
  void loadBlockWeightsOnMatrix(Range range, const TokenBlocks &blocks);
  /// The tile's dots with reordered key `index` of the quantized region
  /// (the other quantized and full-precision pages have vector forms).
  SmallVector<Value> reorderedKeyDots(Value index);
  // Channel reorder (AttendReorder.cpp): a token's variable-size key
  // groups scored against the permuted query, and channel `c` of a key or
  // value found at its position.
  SmallVector<Value> reorderedKeyDots(SliceAccess &access, Value pageToken);
  Value reorderedAt(SliceAccess &access, bool isKeys, Value pageToken, Value c);
  /// Channel c of the quantized key or value at `pageToken` of `access`'s
  /// slice, dequantized.
  Value dequantizeAt(SliceAccess &access, bool isKeys, Value pageToken,
                     Value c);
  // Pre-RoPE keys (AttendRope.cpp).
  /// The position an unrotated query is rotated to (0: none).
  Value queryPosition();
  /// The dots of the tile's queries with key t of `region` rotated to t.
  SmallVector<Value> rotatedKeyDots(unsigned region, Value t);
  SmallVector<Value> fullPrecisionDots(Value buffer, Value element0,
                                       Value queries);
  // OTT pools (AttendPool.cpp): the entries follow the sequence's tokens,
  // [tokens, poolEnd), and their tokens' quantized slots are masked.
  bool hasPool() const { return layout.hasPool(layer); }
  Value countPoolEntries();
  void scorePool(Range range);
  void maskPooledTokens();
  Value poolValueAt(Value t, Value c);
  void softmax();
  void accumulateValues();
  Value valueAt(unsigned region, Value token, Value c);

  void attendTile();
  /// In the last block of (batch, head) to arrive: merges every split of
  /// the kv-head's query heads (from `firstHead`) into the outputs.
  void mergeIfLast(Value firstHead);

  KernelBuilder &kb;
  AttendArgs args;
  const CacheLayout &layout;
  /// The forms of kvq-select-forms for this target.
  AttendFormsAttr forms;
  ModelAttr model;
  /// The kernel's layers; the first one's schemes are all of theirs.
  KernelLayers layers;
  unsigned layer;
  Value split, head, batch;
  /// R, and the query heads of one tile (a divisor of R).
  unsigned ratio, heads, dim;
  /// The most tokens of a split on this target (its score buffer's rows).
  unsigned splitTokens;
  /// The model's index of the current tile's first query head.
  Value firstQueryHead;
  Value slot, tokens, poolEnd;
  Regions regions[2];
  Range splitRange;
  /// The query in f32 by channel, and as quantized keys see it: times the
  /// key norms, in reordered position order (channel reorder).
  Value queries, normQueries, scores;
  /// span = channels keys: sum of the (normalised) query over each group.
  Value groupSums;
  /// Vector loops, per span=tokens block of the split: queries times the
  /// key slopes and their bias; the value weights and their sums; and the
  /// quantized values' share of the output.
  Value foldedQueries, blockBiases, blockWeights, blockWeightSums, valueSums;
  /// The i16 form's folded queries (i16 [block][head][channel]) and their
  /// scales (f32 [block][head]).
  Value pairQueries, blockQueryScales;
  /// The i16 value form's weights of a block's token pairs (f32 and i16,
  /// [pair][head][group][token of the pair]) and their scales (f32,
  /// [head][group][token of the pair]).
  Value pairWeights, roundedPairWeights, pairWeightScales;
  /// The i16 form of span=tokens values: each block's weights rounded
  /// (i16, [block][head][token]) and their scales (f32, [block][head]).
  Value roundedBlockWeights, blockWeightScales;
  /// Matrix forms: each warp's share of valueSums; span=channels keys'
  /// queries as split halves in field order.
  Value matrixPartials, matrixQueries;
  /// span=tokens values on the matrix unit: each block's weights as f16 in
  /// field order.
  Value matrixWeights;
  SmallVector<Value> maxScore, sumExp;
  /// Set when the layer's keys are pre-RoPE.
  std::optional<RopeBuilder> rope;
};

} // namespace attend
} // namespace kvq

#endif // KVQ_CODEGEN_LIB_KERNELS_ATTENDEMITTER_H
