//===- AttendProgram.cpp - the attend kernel as a program -----------------===//
//
// Block (s, h, b) attends the R = Hq / Hkv query heads of kv-head h of
// sequence b over split s of its tokens (flash-decoding). Sinks and window
// rings are full-precision rows in the model's dtype; a page row is one
// too, or a quantized slice's codes and parameters: an element
// `kvq.dequantize` of its code (the shared `loadCodeAt`) and its group's
// scale and zero-point, or a group at a time where a group's codes fill
// whole words and meet one tile of the other operand: span=channels keys
// (the query's channels) and span=tokens values (the weights of the
// group's tokens). Its codes are then one `kvq.unpack` of its words, and
// its dots with the heads' tiles one `kvq.group_dot`, its scale and
// zero-point folded in with the tiles' sums (the targets' forms:
// kvq-expand-group-dots); key norms are folded into the query. The program is
// the emitted kernel's phases written once for both targets, each phase a loop
// shape the targets' patterns know (docs/Rationale.md, "The kernel program"):
//   1. queries: a flat loop over a tile's R x D elements, scaled by softmax
//      scale * log2(e), into block-local memory;
//   2. scores, per region the spec keeps (sink rows, page rows through the
//      split's pages, whose block-table entries the block copies once into
//      block-local memory, the window ring): token dots,
//      `parallel t { parallel c reduce }`;
//   3. softmax statistics: per head a reduction over the split's tokens for
//      the maximum, a flat loop for the weights 2^(s - m), a reduction for
//      their sum;
//   4. value sums per region: `parallel c { parallel t reduce }`, the
//      regions' sums added in block-local memory, the last one normalised
//      into the split's partial row;
//   5. the last block of (b, h) to arrive merges the splits of its R heads
//      (the arrive-last idiom: a one-iteration loop with an atomic add
//      between fences).
// Rows are typed views of byte buffers (`memref.view`) with their alignment
// stated, so that the targets read them 16 bytes at a time.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/ProgramBuilder.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>
#include <cmath>
#include <numeric>

using namespace mlir;
using namespace kvq;

bool kvq::isAttendProgram(const KernelSpec &spec, const CacheLayout &layout) {
  unsigned layer = unsigned(spec.layers.front());
  return spec.kind == KernelKind::Attend &&
         !layout.keys.layers[layer].isQuantized() &&
         !layout.values.layers[layer].isQuantized() && !layout.hasPool(layer);
}

/// Whether the program reads `slice`'s page rows: full precision, or
/// quantized in channel order (no reorder, rotation or pre-RoPE keys).
static bool isProgramSlice(const SliceLayout &slice) {
  if (!slice.isQuantized())
    return true;
  QuantAttr quant = slice.quant;
  return !slice.hasReorder() && !quant.isRotated() && !quant.getPreRope();
}

bool kvq::isQuantizedAttendProgram(const KernelSpec &spec,
                                   const CacheLayout &layout) {
  unsigned layer = unsigned(spec.layers.front());
  const SliceLayout &keys = layout.keys.layers[layer];
  const SliceLayout &values = layout.values.layers[layer];
  return spec.kind == KernelKind::Attend &&
         (keys.isQuantized() || values.isQuantized()) && isProgramSlice(keys) &&
         isProgramSlice(values) && !layout.hasPool(layer);
}

namespace {

/// Tokens [begin, end) of the sequence (i32).
struct TokenRange {
  Value begin, end;
};

/// Tokens of a value region whose sums are one loop: an element at a time,
/// or (`byGroup`) span=tokens groups, whole ones from `range.begin`.
struct ValuePiece {
  TokenRange range;
  unsigned region;
  bool byGroup;
};

/// A token's keys or values as the program reads them: a full-precision row
/// (`row`, D elements), or a quantized page row (`pageToken` of the page
/// whose slice's codes, scales and zero-points, null for sym, are views).
struct TokenRow {
  Value row;
  Value pageToken, codes, scales, zeros;
};

class AttendProgram {
public:
  AttendProgram(OpBuilder &b, Location loc, const CacheLayout &layout,
                unsigned layer)
      : b(b), pb(b, loc), layout(layout), model(layout.model), layer(layer),
        ratio(model.getGroupRatio()), heads(getAttendTileHeads(ratio)),
        dim(model.getHeadDim()) {
    // Dots and sums in any order (fused multiply-adds, lanes' shares), as
    // the emitted attend kernels: outputs are compared within a tolerance.
    pb.setReassociate(true);
  }

  void build(StringRef name);

private:
  using A = abi::AttendArgs;
  Value arg(unsigned id) { return func.getArgument(id); }
  Value index(int64_t value) { return pb.index(value); }
  Value toIndex(Value i32) { return pb.toIndex(i32); }
  Location loc() { return pb.getLoc(); }
  Value descriptor(unsigned field);
  /// The part of `range` inside [lo, hi).
  TokenRange clip(TokenRange range, Value lo, Value hi);
  /// The split's tokens in each region of the keys (`id` 0) or values (1):
  /// sinks, page rows, the window ring.
  std::array<TokenRange, 3> getRegionRanges(unsigned id);
  /// The D elements of a full-precision row at byte `byteOffset` (i64) of
  /// the byte buffer `bytes`, aligned as rows are; rowView: at element
  /// `element` (i32).
  Value rowAt(Value bytes, Value byteOffset);
  Value rowView(Value bytes, Value element);
  /// Token `t` (i32) of region `region` (0 sinks, 1 pages, 2 window) of the
  /// keys or the values: its row.
  TokenRow tokenRow(bool isKeys, unsigned region, Value t);
  /// Element `c` (index) of `row`, as f32: a quantized one dequantized.
  Value element(bool isKeys, const TokenRow &row, Value c);
  /// Copies the block-table entries of the split's pages into block-local
  /// memory, so that a token's page is no dependent load from global memory
  /// (the emitted kernels look a page up once for its tokens).
  void loadSplitPages(bool isKeys);
  /// The row of page row `pageToken` (i32) of the page at block-table entry
  /// `entry` (i32) of the sequence, one of the split's pages.
  TokenRow pageRow(bool isKeys, Value entry, Value pageToken);
  /// The byte offset (i64) of the kv-head's slice of that page.
  Value pageSlice(bool isKeys, Value entry);
  /// The quantized slice at byte `sliceBytes` (pageSlice): views of its
  /// codes (the owner layer's where it shares them), scales and
  /// zero-points.
  TokenRow quantizedRow(bool isKeys, Value sliceBytes, Value pageToken);
  /// The stored scale and zero-point (0 for sym) of group `n` of the
  /// quantized page row `row`, as f32.
  std::pair<Value, Value> loadParams(Quantizer &quantizer, const TokenRow &row,
                                     Value n);
  /// Asks for the row of token `t`'s place in the next page of `range`'s
  /// (the last page asks for itself): a stream a page ahead, for caches
  /// whose prefetchers stop at a page (kvq-distribute-parallel drops it on
  /// the GPU, which keeps loads in flight instead).
  void prefetchNextPage(bool isKeys, TokenRange range, Value t);
  /// Asks for element `at` of `buffer` into L2 (a hint: the GPU drops it).
  void prefetch(Value buffer, Value at);
  /// `parallel i < count` (an index) whose body returns a value per init,
  /// each reduced by `combine` from its init; parallelSum: `sums` values
  /// added from zero.
  scf::ParallelOp reduceInParallel(Value count, ValueRange inits,
                                   function_ref<SmallVector<Value>(Value)> body,
                                   function_ref<Value(Value, Value)> combine);
  scf::ParallelOp parallelSum(Value count, unsigned sums,
                              function_ref<SmallVector<Value>(Value)> body);

  void loadQueries(Value firstQueryHead);
  /// Whether the page keys' dots run a group at a time (span=channels
  /// groups: isReadByGroup).
  bool dotsByGroup() const;
  /// Each head's query sum over each key group, for the folded dots.
  void sumQueryGroups();
  /// The dots of the tile's heads with quantized page keys `keys`, a group
  /// of the token at a time; `rows`: the heads' query rows.
  scf::ParallelOp groupDots(const TokenRow &keys, ArrayRef<Value> rows);
  /// The `words` code words of group `n` of a slice's codes view.
  Value loadGroupWords(Value codes, Value n, unsigned words);
  /// Each head's dot of a group (its `words`, stored `scale` and `zero`)
  /// with its tile of the group's size, `tile(r)`: the codes one
  /// `kvq.unpack`, the dots one `kvq.group_dot` with the tiles' sums
  /// `tileSum(r)`.
  SmallVector<Value> foldedGroupDots(Quantizer &quantizer, QuantAttr quant,
                                     Value words, Value scale, Value zero,
                                     function_ref<Value(unsigned r)> tile,
                                     function_ref<Value(unsigned r)> tileSum);
  /// The bytes a value group's tile of a head's scores is aligned to.
  unsigned getWeightTileAlignment() const;
  void scoreRegion(TokenRange range, unsigned region);
  void softmax();
  /// Whether the page values' sums run a group at a time (span=tokens
  /// groups: isReadByGroup).
  bool sumsByGroup() const;
  /// The value regions' pieces: the page rows, with sumsByGroup, a head
  /// and a tail an element at a time around whole groups.
  SmallVector<ValuePiece> getValuePieces();
  /// Each head's weight sum over each whole group of `piece`.
  void sumWeightGroups(const ValuePiece &piece);
  /// The sums of the tile's heads for channel `c` over the whole groups of
  /// `piece`.
  scf::ParallelOp groupSums(const ValuePiece &piece, Value c);
  void sumValues(Value firstQueryHead);
  void mergeIfLast(Value firstHead);
  void merge(Value firstRow);
  /// Element `at` (index) of the split's scores of head `r` (index).
  Value scoreAt(Value r, Value at);
  /// The first `count` (index) scores of head `r` (index), a view.
  Value scoreRow(Value r, Value count);

  OpBuilder &b;
  ProgramBuilder pb;
  const CacheLayout &layout;
  ModelAttr model;
  /// The first layer the kernel serves: its slices are all of theirs.
  unsigned layer;
  unsigned ratio, heads, dim;
  func::FuncOp func;
  Value split, head, batch, slot, tokens, splitTokens;
  /// Per tensor (keys, values): sink, page and window token counts and the
  /// window ring's oldest row.
  Value sink[2], paged[2], ringHead[2];
  /// Per tensor: the split's pages (block-local, loadSplitPages) and the
  /// block-table entry of the first.
  Value splitPages[2], firstEntry[2];
  TokenRange splitRange;
  /// Block-local: the tile's queries [R][D] (and times the key norms, for
  /// the quantized keys: `normQueries`, else the same buffer), scores
  /// [R][splitTokens], the statistics (m, l) of each head, the value sums
  /// [R][D], the verdict of the arrival.
  Value queries, normQueries, scores, stats, sums, verdict;
  /// Block-local, with dotsByGroup: each head's query sum over each key
  /// group, [R][groups]; with sumsByGroup: each head's weight sum over
  /// each value group of the split, [R][splitTokens] (the first of each
  /// head's row used).
  Value querySums, weightSums;
};

} // namespace

Value AttendProgram::descriptor(unsigned field) {
  Value at =
      pb.add(pb.mul(batch, pb.i32(abi::SeqsFields::NumFields)), pb.i32(field));
  return pb.loadElement(arg(A::Seqs), at);
}

TokenRange AttendProgram::clip(TokenRange range, Value lo, Value hi) {
  Value begin = pb.maxS(range.begin, lo);
  Value end = pb.maxS(pb.select(pb.ult(hi, range.end), hi, range.end), begin);
  return {begin, end};
}

std::array<TokenRange, 3> AttendProgram::getRegionRanges(unsigned id) {
  Value sinkEnd = sink[id], pagedEnd = pb.add(sink[id], paged[id]);
  return {clip(splitRange, pb.i32(0), sinkEnd),
          clip(splitRange, sinkEnd, pagedEnd),
          clip(splitRange, pagedEnd, tokens)};
}

Value AttendProgram::rowAt(Value bytes, Value byteOffset) {
  Value row = pb.view(bytes, byteOffset, model.getDtype(), dim);
  // Rows start on whole rows of the buffers and pages (kLayoutAlignment):
  // 16 bytes where a row is a multiple of 16.
  if (dim * layout.dtypeBytes % 16 != 0)
    return row;
  return memref::AssumeAlignmentOp::create(b, loc(), row, 16);
}

Value AttendProgram::rowView(Value bytes, Value element) {
  return rowAt(bytes, pb.mul(pb.toI64(element), pb.i64(layout.dtypeBytes)));
}

TokenRow AttendProgram::tokenRow(bool isKeys, unsigned region, Value t) {
  const TensorLayout &tensor = layout.get(isKeys);
  unsigned id = isKeys ? 0 : 1;
  if (region == 0)
    return {rowView(
        arg(isKeys ? A::KSink : A::VSink),
        fullPrecisionRow(pb, model, tensor.window.getSink(), slot, t, head))};
  if (region == 2)
    return {rowView(
        arg(isKeys ? A::KWindow : A::VWindow),
        windowElement(pb, model, tensor.windowCapacity, slot, ringHead[id],
                      pb.sub(t, pb.add(sink[id], paged[id])), head))};
  // Page rows: the block table's page, the kv-head's slice, the token's row.
  Value qpos = pb.sub(t, sink[id]);
  Value pageTokens = pb.i32(layout.pageTokens);
  return pageRow(isKeys, pb.divU(qpos, pageTokens), pb.remU(qpos, pageTokens));
}

void AttendProgram::loadSplitPages(bool isKeys) {
  // The block-table entries of the pages the split's page rows lie in,
  // [first, last]: none where the split has no page row.
  unsigned id = isKeys ? 0 : 1;
  TokenRange range = clip(splitRange, sink[id], pb.add(sink[id], paged[id]));
  Value pageTokens = pb.i32(layout.pageTokens);
  Value first = pb.divU(pb.sub(range.begin, sink[id]), pageTokens);
  Value last =
      pb.divU(pb.sub(pb.sub(range.end, sink[id]), pb.i32(1)), pageTokens);
  Value count = pb.select(pb.ult(range.begin, range.end),
                          pb.add(pb.sub(last, first), pb.i32(1)), pb.i32(0));
  Value entries = memref::SubViewOp::create(
      b, loc(), arg(isKeys ? A::KTables : A::VTables),
      ArrayRef<OpFoldResult>{
          toIndex(pb.add(pb.mul(slot, arg(A::MaxPagesPerSeq)), first))},
      ArrayRef<OpFoldResult>{toIndex(count)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  pb.parallelFor(toIndex(count), [&](Value j) {
    pb.storeElement(pb.loadElement(entries, j), splitPages[id], j);
  });
  firstEntry[id] = first;
}

Value AttendProgram::pageSlice(bool isKeys, Value entry) {
  const TensorLayout &tensor = layout.get(isKeys);
  unsigned id = isKeys ? 0 : 1;
  Value page = pb.loadElement(splitPages[id], pb.sub(entry, firstEntry[id]));
  return sliceByteOffset(pb, tensor, tensor.layers[layer], page, head);
}

TokenRow AttendProgram::pageRow(bool isKeys, Value entry, Value pageToken) {
  Value slice = pageSlice(isKeys, entry);
  if (layout.get(isKeys).layers[layer].isQuantized())
    return quantizedRow(isKeys, slice, pageToken);
  Value rowBytes =
      pb.mul(pb.toI64(pageToken), pb.i64(int64_t(dim) * layout.dtypeBytes));
  return {rowAt(arg(isKeys ? A::KPages : A::VPages), pb.add(slice, rowBytes))};
}

TokenRow AttendProgram::quantizedRow(bool isKeys, Value sliceBytes,
                                     Value pageToken) {
  const SliceLayout &slice = layout.get(isKeys).layers[layer];
  Value pages = arg(isKeys ? A::KPages : A::VPages);
  Type bitsType = Quantizer(pb, slice.quant).getParamBitsType();
  auto params = [&](uint64_t offset) {
    return pb.view(pages, pb.add(sliceBytes, pb.i64(offset)), bitsType,
                   slice.GroupsPerPage);
  };
  TokenRow row;
  row.pageToken = pageToken;
  Value codes = sliceBytes;
  if (slice.sharesCodes())
    codes =
        pb.add(sliceBytes,
               pb.add(pb.i64(slice.CodesLayerDelta),
                      pb.mul(pb.toI64(head), pb.i64(slice.CodesHeadDelta))));
  row.codes = pb.view(pages, codes, b.getI32Type(),
                      int64_t(slice.GroupsPerPage) * slice.WordsPerGroup);
  row.scales = params(slice.ScalesOffset);
  if (slice.hasZeros())
    row.zeros = params(slice.ZerosOffset);
  return row;
}

std::pair<Value, Value>
AttendProgram::loadParams(Quantizer &quantizer, const TokenRow &row, Value n) {
  Value scale = quantizer.paramFromBits(pb.loadElement(row.scales, n));
  Value zero = row.zeros ? quantizer.paramFromBits(pb.loadElement(row.zeros, n))
                         : pb.f32(0);
  return {scale, zero};
}

Value AttendProgram::element(bool isKeys, const TokenRow &row, Value c) {
  if (row.row)
    return pb.loadElementAsF32(row.row, c);
  const SliceLayout &slice = layout.get(isKeys).layers[layer];
  QuantAttr quant = slice.quant;
  unsigned group = quant.getGroup();
  // Group n of the page and the element's place k in it (docs/KernelABI.md).
  Value channel = pb.indexToI32(c), n, k;
  if (quant.getSpan() == Span::Channels) {
    n = pb.add(pb.mul(row.pageToken, pb.i32(slice.GroupsPerToken)),
               pb.divU(channel, pb.i32(group)));
    k = pb.remU(channel, pb.i32(group));
  } else {
    n = pb.add(pb.mul(pb.divU(row.pageToken, pb.i32(group)), pb.i32(dim)),
               channel);
    k = pb.remU(row.pageToken, pb.i32(group));
  }
  Value code =
      loadCodeAt(pb, quant.getBits(), pb.mul(n, pb.i32(slice.WordsPerGroup)), k,
                 [&](Value i) { return pb.loadElement(row.codes, i); });
  Quantizer quantizer(pb, quant);
  auto [scale, zero] = loadParams(quantizer, row, n);
  return DequantizeOp::create(b, loc(), b.getF32Type(), code, scale, zero,
                              quant);
}

void AttendProgram::prefetch(Value buffer, Value at) {
  memref::PrefetchOp::create(b, loc(), buffer, ValueRange{at},
                             /*isWrite=*/false, /*localityHint=*/2,
                             /*isDataCache=*/true);
}

void AttendProgram::prefetchNextPage(bool isKeys, TokenRange range, Value t) {
  Value first = sink[isKeys ? 0 : 1];
  Value pageTokens = pb.i32(layout.pageTokens);
  Value qpos = pb.sub(t, first);
  Value lastPage =
      pb.divU(pb.sub(pb.sub(range.end, first), pb.i32(1)), pageTokens);
  Value next = pb.minU(pb.add(pb.divU(qpos, pageTokens), pb.i32(1)), lastPage);
  Value pageToken = pb.remU(qpos, pageTokens);
  const SliceLayout &slice = layout.get(isKeys).layers[layer];
  if (slice.isQuantized()) {
    // A quantized row is no run of bytes (span=tokens codes lie a group
    // apart): the page's tokens share the slice's 64-byte lines instead,
    // token p asking for lines [p * n, p * n + n).
    unsigned lines = llvm::divideCeil(slice.SliceBytes, 64);
    unsigned perToken = llvm::divideCeil(lines, layout.pageTokens);
    Value first = pb.add(pageSlice(isKeys, next),
                         pb.mul(pb.toI64(pageToken), pb.i64(64 * perToken)));
    Value pages = arg(isKeys ? A::KPages : A::VPages);
    for (unsigned line = 0; line < perToken; ++line)
      prefetch(pages, toIndex(pb.add(first, pb.i64(64 * line))));
    return;
  }
  Value row = pageRow(isKeys, next, pageToken).row;
  // Each 64-byte line of the row, into L2 (as the emitted kernels ask).
  unsigned perLine = 64 / layout.dtypeBytes;
  for (unsigned c = 0; c < dim; c += perLine)
    prefetch(row, index(c));
}

scf::ParallelOp
AttendProgram::reduceInParallel(Value count, ValueRange inits,
                                function_ref<SmallVector<Value>(Value)> body,
                                function_ref<Value(Value, Value)> combine) {
  return pb.parallelReduce(count, inits, body, [&](unsigned, Value x, Value y) {
    return combine(x, y);
  });
}

scf::ParallelOp
AttendProgram::parallelSum(Value count, unsigned sumCount,
                           function_ref<SmallVector<Value>(Value)> body) {
  return reduceInParallel(count, SmallVector<Value>(sumCount, pb.f32(0)), body,
                          [&](Value x, Value y) { return pb.fadd(x, y); });
}

Value AttendProgram::scoreRow(Value r, Value count) {
  Value first = arith::MulIOp::create(b, loc(), r, toIndex(splitTokens));
  return memref::SubViewOp::create(
      b, loc(), scores, ArrayRef<OpFoldResult>{first},
      ArrayRef<OpFoldResult>{count}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

Value AttendProgram::scoreAt(Value r, Value at) {
  Value first = arith::MulIOp::create(b, loc(), r, toIndex(splitTokens));
  return arith::AddIOp::create(b, loc(), first, at);
}

void AttendProgram::loadQueries(Value firstQueryHead) {
  // The tile's rows are consecutive in q.
  Value tileRow =
      pb.add(pb.mul(batch, pb.i32(model.getHeads())), firstQueryHead);
  Value first = toIndex(pb.mul(tileRow, pb.i32(dim)));
  Value scale = pb.f32(model.getSoftmaxScale() * M_LOG2E);
  // Key norms: the kv-head's row of the sequence's norms.
  Value norms;
  if (normQueries != queries)
    norms =
        pb.row(arg(A::Norms),
               pb.mul(pb.add(pb.mul(slot, pb.i32(model.getKvHeads())), head),
                      pb.i32(dim)),
               dim);
  pb.parallelFor(heads * dim, [&](Value i) {
    Value at = arith::AddIOp::create(b, loc(), first, i);
    Value q = pb.fmul(pb.loadElementAsF32(arg(A::Q), at), scale);
    pb.storeElement(q, queries, i);
    if (!norms)
      return;
    Value c = arith::RemUIOp::create(b, loc(), i, index(dim));
    pb.storeElement(pb.fmul(q, pb.loadElement(norms, c)), normQueries, i);
  });
}

/// The regions `tensor`'s tokens can lie in (0 sinks, 1 pages, 2 window):
/// the sinks and the window only where the spec keeps them.
static SmallVector<unsigned, 3> getRegions(const TensorLayout &tensor) {
  SmallVector<unsigned, 3> regions;
  if (tensor.window.getSink() > 0)
    regions.push_back(0);
  regions.push_back(1);
  if (tensor.windowCapacity > 0)
    regions.push_back(2);
  return regions;
}

/// The alignment of an address `bytes` past one aligned to `alignment` (a
/// power of two).
static unsigned getAlignment(unsigned alignment, uint64_t bytes) {
  return unsigned(std::gcd(uint64_t(alignment), bytes));
}

Value AttendProgram::loadGroupWords(Value codes, Value n, unsigned words) {
  // A slice's codes start on kLayoutAlignment bytes (a sharing layer's,
  // the owner's, too), and group n's words n * words words after.
  return vector::LoadOp::create(
      b, loc(), VectorType::get({words}, b.getI32Type()), codes,
      ValueRange{toIndex(pb.mul(n, pb.i32(words)))}, /*nontemporal=*/false,
      llvm::MaybeAlign(getAlignment(abi::kLayoutAlignment, words * 4)));
}

/// Whether `slice`'s groups are read a group at a time: quantized with
/// `span`, so that a group lies along the tile it meets, its codes filling
/// whole words, at most 64 of them (a GPU thread keeps them as a tile).
static bool isReadByGroup(const SliceLayout &slice, Span span) {
  if (!slice.isQuantized() || slice.quant.getSpan() != span)
    return false;
  unsigned group = slice.quant.getGroup();
  return group * slice.quant.getBits() % 32 == 0 && group <= 64;
}

bool AttendProgram::dotsByGroup() const {
  return isReadByGroup(layout.keys.layers[layer], Span::Channels);
}

void AttendProgram::sumQueryGroups() {
  unsigned group = layout.keys.layers[layer].quant.getGroup();
  pb.parallelFor(heads * dim / group, [&](Value i) {
    Value first = arith::MulIOp::create(b, loc(), i, index(group));
    Value q = pb.loadVectorAsF32(normQueries, first, group,
                                 getAlignment(16, group * 4));
    pb.storeElement(pb.reduceAdd(q), querySums, i);
  });
}

scf::ParallelOp AttendProgram::groupDots(const TokenRow &keys,
                                         ArrayRef<Value> rows) {
  const SliceLayout &slice = layout.keys.layers[layer];
  unsigned group = slice.quant.getGroup(), groups = slice.GroupsPerToken;
  Quantizer quantizer(pb, slice.quant);
  // The heads' rows start on their whole rows of an aligned buffer.
  unsigned alignment = getAlignment(getAlignment(16, dim * 4), group * 4);
  return parallelSum(index(groups), heads, [&](Value g) {
    Value n = pb.add(pb.mul(keys.pageToken, pb.i32(groups)), pb.indexToI32(g));
    Value words = loadGroupWords(keys.codes, n, slice.WordsPerGroup);
    auto [scale, zero] = loadParams(quantizer, keys, n);
    Value first = arith::MulIOp::create(b, loc(), g, index(group));
    return foldedGroupDots(
        quantizer, slice.quant, words, scale, zero,
        [&](unsigned r) {
          return pb.loadVectorAsF32(rows[r], first, group, alignment);
        },
        [&](unsigned r) {
          return pb.loadElement(
              querySums, arith::AddIOp::create(b, loc(), index(r * groups), g));
        });
  });
}

void AttendProgram::scoreRegion(TokenRange range, unsigned region) {
  // The heads' query rows, views at whole rows of the aligned buffer; the
  // pages' quantized keys meet them times the key norms.
  Value buffer = region == 1 ? normQueries : queries;
  SmallVector<Value> rows;
  for (unsigned r = 0; r < heads; ++r)
    rows.push_back(pb.row(buffer, index(r * dim), dim));
  Value count = toIndex(pb.sub(range.end, range.begin));
  pb.parallelFor(count, [&](Value i) {
    Value t = pb.add(range.begin, pb.indexToI32(i));
    TokenRow keys = tokenRow(/*isKeys=*/true, region, t);
    if (region == 1)
      prefetchNextPage(/*isKeys=*/true, range, t);
    scf::ParallelOp dots =
        region == 1 && dotsByGroup()
            ? groupDots(keys, rows)
            : parallelSum(index(dim), heads, [&](Value c) {
                Value k = element(/*isKeys=*/true, keys, c);
                SmallVector<Value> products;
                for (Value row : rows)
                  products.push_back(pb.fmul(pb.loadElement(row, c), k));
                return products;
              });
    Value local = toIndex(pb.sub(t, splitRange.begin));
    for (unsigned r = 0; r < heads; ++r)
      pb.storeElement(dots.getResult(r), scores, scoreAt(index(r), local));
  });
}

void AttendProgram::softmax() {
  Value count = toIndex(pb.sub(splitRange.end, splitRange.begin));
  // Per head a team of threads (a warp's on the GPU) or the host's lanes
  // over the split's tokens: the maximum, then after the weights their sum.
  auto perHead = [&](unsigned statistic, Value init,
                     function_ref<Value(Value, Value)> combine) {
    pb.parallelFor(heads, [&](Value r) {
      // The head's row, so that its tokens are the host's lanes.
      Value row = scoreRow(r, count);
      Value result = reduceInParallel(
                         count, init,
                         [&](Value t) -> SmallVector<Value> {
                           return {pb.loadElement(row, t)};
                         },
                         combine)
                         .getResult(0);
      Value at = arith::AddIOp::create(
          b, loc(), arith::MulIOp::create(b, loc(), r, index(2)),
          index(statistic));
      pb.storeElement(result, stats, at);
    });
  };
  perHead(0, pb.f32(-INFINITY),
          [&](Value x, Value y) { return pb.selectMax(x, y); });
  // A split with no tokens has m = -inf and no weights.
  for (unsigned r = 0; r < heads; ++r) {
    Value m = pb.loadElement(stats, index(2 * r));
    Value row = scoreRow(index(r), count);
    pb.parallelFor(count, [&](Value t) {
      Value p = pb.exp2(pb.fsub(pb.loadElement(row, t), m));
      pb.storeElement(p, row, t);
    });
  }
  perHead(1, pb.f32(0), [&](Value x, Value y) { return pb.fadd(x, y); });
}

SmallVector<Value>
AttendProgram::foldedGroupDots(Quantizer &quantizer, QuantAttr quant,
                               Value words, Value scale, Value zero,
                               function_ref<Value(unsigned r)> tile,
                               function_ref<Value(unsigned r)> tileSum) {
  unsigned group = quant.getGroup(), bits = quant.getBits();
  Value codes =
      UnpackOp::create(b, loc(), VectorType::get({group}, b.getI32Type()),
                       words, b.getI32IntegerAttr(bits), b.getI32IntegerAttr(0),
                       b.getI32IntegerAttr(bits));
  AffineTerms terms = quantizer.affine(scale, zero);
  SmallVector<Value> tiles, sums;
  for (unsigned r = 0; r < heads; ++r) {
    tiles.push_back(tile(r));
    sums.push_back(tileSum(r));
  }
  return GroupDotOp::create(b, loc(), SmallVector<Type>(heads, b.getF32Type()),
                            codes, terms.slope, terms.offset, tiles, sums)
      .getResults();
}

unsigned AttendProgram::getWeightTileAlignment() const {
  // Splits start on multiples of the split granule, each head's scores on
  // multiples of the planned split size (one too), and value groups on
  // multiples of the group size past the sinks, which are full before any
  // page row: a tile starts sinks + a multiple of gcd(granule, group) tokens
  // into the aligned scores.
  unsigned step = std::gcd(layout.splitGranule,
                           layout.values.layers[layer].quant.getGroup());
  unsigned sinks = layout.values.window.getSink();
  return getAlignment(16, 4 * std::gcd(step, sinks));
}

bool AttendProgram::sumsByGroup() const {
  return isReadByGroup(layout.values.layers[layer], Span::Tokens);
}

SmallVector<ValuePiece> AttendProgram::getValuePieces() {
  std::array<TokenRange, 3> ranges = getRegionRanges(/*id=*/1);
  SmallVector<ValuePiece> pieces;
  for (unsigned region : getRegions(layout.values)) {
    TokenRange range = ranges[region];
    if (region != 1 || !sumsByGroup()) {
      pieces.push_back({range, region, false});
      continue;
    }
    // Groups start at multiples of the group size from the first page row:
    // [begin, the first start), the whole groups, [the last start, end).
    Value first = sink[1];
    Value group = pb.i32(layout.values.layers[layer].quant.getGroup());
    Value qBegin = pb.sub(range.begin, first), qEnd = pb.sub(range.end, first);
    Value up =
        pb.mul(pb.divU(pb.add(qBegin, pb.sub(group, pb.i32(1))), group), group);
    Value down = pb.mul(pb.divU(qEnd, group), group);
    Value headEnd = pb.add(first, pb.minU(up, qEnd));
    Value groupsEnd = pb.maxS(pb.add(first, down), headEnd);
    pieces.push_back({{range.begin, headEnd}, region, false});
    pieces.push_back({{headEnd, groupsEnd}, region, true});
    pieces.push_back({{groupsEnd, range.end}, region, false});
  }
  return pieces;
}

void AttendProgram::sumWeightGroups(const ValuePiece &piece) {
  unsigned group = layout.values.layers[layer].quant.getGroup();
  Value count = toIndex(
      pb.divU(pb.sub(piece.range.end, piece.range.begin), pb.i32(group)));
  Value first = toIndex(pb.sub(piece.range.begin, splitRange.begin));
  pb.parallelFor(count, [&](Value j) {
    Value at = arith::AddIOp::create(
        b, loc(), first, arith::MulIOp::create(b, loc(), j, index(group)));
    for (unsigned r = 0; r < heads; ++r) {
      Value p = pb.loadVectorAsF32(scores, scoreAt(index(r), at), group,
                                   getWeightTileAlignment());
      pb.storeElement(pb.reduceAdd(p), weightSums, scoreAt(index(r), j));
    }
  });
}

scf::ParallelOp AttendProgram::groupSums(const ValuePiece &piece, Value c) {
  const SliceLayout &slice = layout.values.layers[layer];
  unsigned group = slice.quant.getGroup();
  Quantizer quantizer(pb, slice.quant);
  unsigned alignment = getWeightTileAlignment();
  Value count = toIndex(
      pb.divU(pb.sub(piece.range.end, piece.range.begin), pb.i32(group)));
  return parallelSum(count, heads, [&](Value j) {
    Value t =
        pb.add(piece.range.begin, pb.mul(pb.indexToI32(j), pb.i32(group)));
    TokenRow values = tokenRow(/*isKeys=*/false, /*region=*/1, t);
    // The group of channel c over the tokens [t, t + group).
    auto groupOf = [&](const TokenRow &row) {
      return pb.add(pb.mul(pb.divU(row.pageToken, pb.i32(group)), pb.i32(dim)),
                    pb.indexToI32(c));
    };
    Value n = groupOf(values);
    Value words = loadGroupWords(values.codes, n, slice.WordsPerGroup);
    // The channel's group a page ahead (at the end, the last group's): the
    // channels' loop reads a few lines of each group's block at a time,
    // which no prefetcher follows across pages.
    Value ahead = pb.minU(pb.add(t, pb.i32(layout.pageTokens)),
                          pb.sub(piece.range.end, pb.i32(group)));
    TokenRow next = tokenRow(/*isKeys=*/false, /*region=*/1, ahead);
    Value nextGroup = groupOf(next);
    prefetch(next.codes,
             toIndex(pb.mul(nextGroup, pb.i32(slice.WordsPerGroup))));
    prefetch(next.scales, toIndex(nextGroup));
    auto [scale, zero] = loadParams(quantizer, values, n);
    Value local = toIndex(pb.sub(t, splitRange.begin));
    return foldedGroupDots(
        quantizer, slice.quant, words, scale, zero,
        [&](unsigned r) {
          return pb.loadVectorAsF32(scores, scoreAt(index(r), local), group,
                                    alignment);
        },
        [&](unsigned r) {
          return pb.loadElement(weightSums, scoreAt(index(r), j));
        });
  });
}

void AttendProgram::sumValues(Value firstQueryHead) {
  // The partial rows of the tile's heads: [D + 2] f32 slots each, m and l,
  // then the outputs normalised by l from byte 8 (getPartialOutputType).
  Type outputType = getPartialOutputType(layout, b.getContext());
  SmallVector<Value> partialRows;
  for (unsigned r = 0; r < heads; ++r) {
    Value row = pb.add(pb.mul(batch, pb.i32(model.getHeads())),
                       pb.add(firstQueryHead, pb.i32(r)));
    Value slot0 =
        pb.mul(pb.add(pb.mul(row, arg(A::NumSplits)), split), pb.i32(dim + 2));
    partialRows.push_back(pb.mul(pb.toI64(slot0), pb.i64(4)));
  }
  // Each head's sums as a row, so that the channels are the host's lanes.
  SmallVector<Value> sumRows;
  for (unsigned r = 0; r < heads; ++r)
    sumRows.push_back(pb.row(sums, index(r * dim), dim));
  SmallVector<ValuePiece> pieces = getValuePieces();
  for (const ValuePiece &piece : pieces) {
    if (piece.byGroup)
      sumWeightGroups(piece);
  }
  for (const ValuePiece &piece : pieces) {
    bool first = &piece == &pieces.front(), last = &piece == &pieces.back();
    TokenRange range = piece.range;
    unsigned region = piece.region;
    Value count = toIndex(pb.sub(range.end, range.begin));
    pb.parallelFor(dim, [&](Value c) {
      scf::ParallelOp loop =
          piece.byGroup
              ? groupSums(piece, c)
              : parallelSum(count, heads, [&](Value i) {
                  Value t = pb.add(range.begin, pb.indexToI32(i));
                  Value v = element(
                      /*isKeys=*/false, tokenRow(/*isKeys=*/false, region, t),
                      c);
                  if (region == 1)
                    prefetchNextPage(/*isKeys=*/false, range, t);
                  Value local = toIndex(pb.sub(t, splitRange.begin));
                  SmallVector<Value> products;
                  for (unsigned r = 0; r < heads; ++r)
                    products.push_back(pb.fmul(
                        pb.loadElement(scores, scoreAt(index(r), local)), v));
                  return products;
                });
      for (unsigned r = 0; r < heads; ++r) {
        Value sum = loop.getResult(r);
        if (!first)
          sum = pb.fadd(pb.loadElement(sumRows[r], c), sum);
        if (!last) {
          pb.storeElement(sum, sumRows[r], c);
          continue;
        }
        // The last region: normalised by l (an empty split stores zeros).
        Value l = pb.loadElement(stats, index(2 * r + 1));
        Value output = pb.fmul(sum, inverseOrZero(pb, l));
        if (!outputType.isF32())
          output = arith::TruncFOp::create(b, loc(), outputType, output);
        Value outputs =
            pb.view(arg(A::Partial), pb.add(partialRows[r], pb.i64(8)),
                    outputType, dim);
        pb.storeElement(output, outputs, c);
      }
    });
  }
  // m and l of each head, by one thread.
  pb.parallelFor(1, [&](Value) {
    for (unsigned r = 0; r < heads; ++r) {
      Value fields =
          pb.view(arg(A::Partial), partialRows[r], b.getF32Type(), 2);
      for (unsigned k = 0; k < 2; ++k)
        pb.storeElement(pb.loadElement(stats, index(2 * r + k)), fields,
                        index(k));
    }
  });
}

void AttendProgram::mergeIfLast(Value firstHead) {
  // Blocks (s, h, b) of every split s count themselves at arrivals[b][h],
  // one thread of each after the block's writes; the last resets the
  // counter. The fences are explicit: LLVM 22's NVPTX backend drops an
  // atomicrmw's ordering.
  Value counter =
      toIndex(pb.add(pb.mul(batch, pb.i32(model.getKvHeads())), head));
  pb.parallelFor(1, [&](Value) {
    LLVM::FenceOp::create(b, loc(), LLVM::AtomicOrdering::acq_rel);
    Value arrived = memref::AtomicRMWOp::create(
        b, loc(), arith::AtomicRMWKind::addi, pb.i32(1), arg(A::Arrivals),
        ValueRange{counter});
    Value last = pb.eq(arrived, pb.sub(arg(A::NumSplits), pb.i32(1)));
    pb.ifThen(last, [&] {
      LLVM::FenceOp::create(b, loc(), LLVM::AtomicOrdering::acq_rel);
      pb.storeElement(pb.i32(0), arg(A::Arrivals), counter);
    });
    pb.storeElement(arith::ExtUIOp::create(b, loc(), b.getI32Type(), last),
                    verdict, index(0));
  });
  Value last = pb.eq(pb.loadElement(verdict, index(0)), pb.i32(1));
  pb.ifThen(last, [&] {
    merge(pb.add(pb.mul(batch, pb.i32(model.getHeads())), firstHead));
  });
}

void AttendProgram::merge(Value firstRow) {
  // o = sum_s w_s o_s / sum_s w_s, w_s = 2^(m_s - M) l_s, per head and
  // channel; M at least the lowest finite float, so that an empty split
  // (m = -inf, l = 0) weighs 0 with no test.
  Type outputType = getPartialOutputType(layout, b.getContext());
  Value numSplits = arg(A::NumSplits);
  pb.forEach(pb.i32(0), pb.i32(ratio), [&](Value r) {
    Value row = pb.add(firstRow, r);
    Value rowSlots = pb.mul(pb.mul(row, numSplits), pb.i32(dim + 2));
    auto splitBytes = [&](Value s) {
      return pb.mul(pb.toI64(pb.add(rowSlots, pb.mul(s, pb.i32(dim + 2)))),
                    pb.i64(4));
    };
    auto field = [&](Value s, unsigned k) {
      Value fields = pb.view(arg(A::Partial), splitBytes(s), b.getF32Type(), 2);
      return pb.loadElement(fields, index(k));
    };
    Value out = pb.row(arg(A::Out), pb.mul(row, pb.i32(dim)), dim);
    pb.parallelFor(dim, [&](Value c) {
      Value maxScore =
          pb.forLoop(pb.i32(0), numSplits, pb.i32(1), {pb.f32(kLowestSplitMax)},
                     [&](Value s, ValueRange acc) -> SmallVector<Value> {
                       return {pb.selectMax(field(s, 0), acc[0])};
                     })[0];
      SmallVector<Value> totals =
          pb.forLoop(pb.i32(0), numSplits, pb.i32(1), {pb.f32(0), pb.f32(0)},
                     [&](Value s, ValueRange acc) -> SmallVector<Value> {
                       Value weight = weighSplit(
                           pb, maxScore, [&] { return field(s, 0); },
                           [&] { return field(s, 1); });
                       Value outputs = pb.view(arg(A::Partial),
                                               pb.add(splitBytes(s), pb.i64(8)),
                                               outputType, dim);
                       Value o = pb.loadElementAsF32(outputs, c);
                       return {pb.fadd(acc[0], weight),
                               pb.fadd(acc[1], pb.fmul(weight, o))};
                     });
      pb.storeElement(mergeOutputs(pb, totals[1], totals[0]), out, c);
    });
  });
}

void AttendProgram::build(StringRef name) {
  Type i32 = b.getI32Type(), i8 = b.getI8Type(), f32 = b.getF32Type();
  SmallVector<Type> args(A::NumArgs, i32);
  for (unsigned id : {A::Partial, A::KPages, A::VPages, A::KSink, A::VSink,
                      A::KWindow, A::VWindow, A::KPool, A::VPool})
    args[id] = ProgramBuilder::getBufferType(i8);
  for (unsigned id :
       {A::Arrivals, A::Seqs, A::KTables, A::VTables, A::PoolIndex})
    args[id] = ProgramBuilder::getBufferType(i32);
  args[A::Q] = ProgramBuilder::getBufferType(model.getDtype());
  args[A::Out] = ProgramBuilder::getBufferType(f32);
  args[A::Norms] = ProgramBuilder::getBufferType(f32);
  OpBuilder::InsertionGuard guard(b);
  func = pb.createProgram(name, args);
  splitTokens = arg(A::SplitTokens);
  queries = pb.allocBlockLocal(f32, heads * dim, /*alignment=*/16);
  normQueries = layout.hasKeyNorm(layer)
                    ? pb.allocBlockLocal(f32, heads * dim, /*alignment=*/16)
                    : queries;
  // Aligned where the value groups read tiles of a head's scores.
  scores = pb.allocSplitLocal(f32, heads, toIndex(splitTokens),
                              sumsByGroup() ? 16 : 0);
  stats = pb.allocBlockLocal(f32, heads * 2);
  if (dotsByGroup())
    querySums = pb.allocBlockLocal(
        f32, heads * layout.keys.layers[layer].GroupsPerToken);
  if (sumsByGroup())
    weightSums = pb.allocSplitLocal(f32, heads, toIndex(splitTokens));
  sums = pb.allocBlockLocal(f32, heads * dim, /*alignment=*/16);
  verdict = pb.allocBlockLocal(i32, 1);
  // A split's pages: at most one a token.
  for (Value &pages : splitPages)
    pages = pb.allocSplitLocal(i32, 1, toIndex(splitTokens));
  split = pb.getBlockId(gpu::Dimension::x);
  head = pb.getBlockId(gpu::Dimension::y);
  batch = pb.getBlockId(gpu::Dimension::z);
  using F = abi::SeqsFields;
  slot = descriptor(F::Slot);
  tokens = descriptor(F::Tokens);
  sink[0] = descriptor(F::KSink);
  paged[0] = descriptor(F::KQuantized);
  ringHead[0] = descriptor(F::KWindowHead);
  sink[1] = descriptor(F::VSink);
  paged[1] = descriptor(F::VQuantized);
  ringHead[1] = descriptor(F::VWindowHead);
  // The planned split: at most the target's capacity (the runtime's plan),
  // empty past the sequence's end.
  Value begin = pb.mul(split, splitTokens);
  splitRange = clip({begin, pb.add(begin, splitTokens)}, pb.i32(0), tokens);
  loadSplitPages(/*isKeys=*/true);
  loadSplitPages(/*isKeys=*/false);
  Value firstHead = pb.mul(head, pb.i32(ratio));
  pb.forEach(pb.i32(0), pb.i32(ratio / heads), [&](Value tile) {
    Value firstQueryHead = pb.add(firstHead, pb.mul(tile, pb.i32(heads)));
    loadQueries(firstQueryHead);
    if (dotsByGroup())
      sumQueryGroups();
    std::array<TokenRange, 3> ranges = getRegionRanges(/*id=*/0);
    for (unsigned region : getRegions(layout.keys))
      scoreRegion(ranges[region], region);
    softmax();
    sumValues(firstQueryHead);
  });
  mergeIfLast(firstHead);
  func::ReturnOp::create(b, loc());
}

void kvq::buildAttendProgram(OpBuilder &b, Location loc, const KernelSpec &spec,
                             const CacheLayout &layout) {
  AttendProgram(b, loc, layout, unsigned(spec.layers.front())).build(spec.name);
}
