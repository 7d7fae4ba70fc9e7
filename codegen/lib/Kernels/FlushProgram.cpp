//===- FlushProgram.cpp - the flush kernel as a program -------------------===//
//
// Block (u, h) moves flush unit u of kv-head h into the pages, for a
// full-precision slice (a copy), a span = tokens slice (quantized per
// channel over blocks of `group` tokens) or a span = channels slice
// (quantized per token over groups of `group` channels). The tokens are read
// where they are (FlushSource); each group is quantized by one iteration of
// a parallel loop, by the same Quantizer arithmetic as the reference:
// - span = tokens: an iteration per channel, in index order;
//   kvq-vectorize-parallel makes the channels the host's lanes (a lane per
//   group), kvq-distribute-parallel a thread per group on the GPU;
// - span = channels: an iteration per group of a token, on tiles of the
//   group's channels (vectors: the host's SIMD registers, a GPU thread's
//   registers), its range reduced across the tile (min and max are exact in
//   any order; hybrid's squared errors are summed in index order) and its
//   codes packed by `kvq.pack`.
// A rotated slice's tokens are rotated, a chunk of the unit at a time, into
// block-local memory as f32 (`kvq.hadamard`, reading them where they are);
// its groups read them there. A slice with channel tables (ChannelTables.h,
// `memref.global`s of the program) takes each group's clip factor from its
// table; with channel reorder a group has its own size and channels, and is
// quantized element by element, its codes packed by a loop.
//
// The kernel is a program for both targets (ProgramBuilder.h); a page's
// regions are typed views of its bytes (`memref.view`).
//
//===----------------------------------------------------------------------===//

#include "ChannelTables.h"
#include "kvq/Codegen/ProgramBuilder.h"

#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include <limits>
#include <numeric>

using namespace mlir;
using namespace kvq;

namespace {

/// A span = channels group as tiles: `count` of `size` codes, then `rest`
/// codes (0: none). A tile is the fewest codes whose stream fills whole
/// words (lcm(bits, 32) / bits), doubled while the group holds a whole
/// number of them and they stay at most 32 codes: two AVX-512 registers of
/// f32, and few enough that a GPU thread keeps a tile's values and codes in
/// registers.
struct GroupTiles {
  unsigned size, count, rest;

  explicit GroupTiles(QuantAttr quant) {
    unsigned group = quant.getGroup(), bits = quant.getBits();
    size = std::lcm(bits, 32u) / bits;
    while (2 * size <= 32 && group % (2 * size) == 0)
      size *= 2;
    size = std::min(size, group);
    count = group / size;
    rest = group % size;
  }
};

class FlushProgram {
public:
  FlushProgram(OpBuilder &b, Location loc, const CacheLayout &layout,
               const KernelSpec &spec)
      : pb(b, loc), layout(layout), model(layout.model), spec(spec),
        tensor(layout.get(spec.isKeys)),
        slice(tensor.layers[spec.layers.front()]),
        flush(tensor.window.getFlush()), dim(model.getHeadDim()) {}

  void build(StringRef name);

private:
  using A = abi::FlushArgs;

  Value arg(unsigned id) { return func.getArgument(id); }
  /// Runs `body(t)` for t in [0, count), t an i32, a parallel loop where
  /// there is more than one.
  void forEachToken(unsigned count, function_ref<void(Value)> body);
  /// Flushed token `token`'s row of `dim` elements as appended (model
  /// dtype).
  Value sourceRow(Value token);
  /// The same as quantized: sourceRow, or for a rotated slice the rotated
  /// row in block-local memory (f32).
  Value tokenRow(Value token);
  /// The byte offset of the slice holding quantized position `qpos`.
  Value sliceAt(Value qpos);
  /// Sets the NonFinite flag where `x` (f32, or a vector of them) is not
  /// finite: the runtime then rejects the append and undoes the flush
  /// (docs/Reliability.md).
  void flagNonFinite(Value x);
  /// The same where `bad` (i1, or a vector of them) is set.
  void flag(Value bad);
  /// Where the `count` groups from group `n0` of the slice at byte `base`
  /// keep their codes (`words` from word `word`; null: the layer shares
  /// another's), scales and zero-points (null: sym), and the key norms of
  /// kv-head `head` (null: none).
  struct GroupRows {
    Value codes, scales, zeros, norms;
  };
  GroupRows groupRows(Value base, Value n0, unsigned count, Value word,
                      unsigned words);

  void buildFullPrecision();
  /// Quantizes the `tokens` tokens from `firstToken`.
  void buildQuantized();
  /// A rotated slice quantizes R x (docs/Numerics.md, "Hadamard
  /// rotation"): the unit's tokens are rotated into `rotated`, a chunk
  /// that fits the GPU's static shared memory at a time
  /// (getRotatedChunkTokens: whole groups).
  void buildRotated();
  void buildTokenGroups();
  void buildChannelGroups();
  /// A span = channels group being quantized: group `g` of a token's row
  /// `row` (first channel `first`), stored at element g of `rows`.
  struct ChannelGroup {
    Value g, row, first;
    const GroupRows &rows;
    GroupTiles tiles;
    /// A clip table's factor of the group (null: none).
    Value clip;
  };
  /// Quantizes `group`, tile by tile (GroupTiles).
  void quantizeChannelGroup(const ChannelGroup &group);
  /// Channel reorder: quantizes group `g` (index) of the token's row `row`,
  /// its size, channels (channelAt) and first word of the token's `codes`
  /// from the tables, element by element in index order.
  void quantizeReorderedGroup(Value g, Value row, const GroupRows &rows);
  /// The `size` channels from channel `start` (index) of `group` as f32
  /// divided by their key norms; `check`: the parameters' pass, which flags
  /// non-finite lanes and reads them as 0.
  Value loadTile(const ChannelGroup &group, Value start, unsigned size,
                 bool check);
  /// The parameters of `group`; `whole` is set to its tile where it has one
  /// (the codes' pass reuses it).
  GroupParams channelGroupParams(const ChannelGroup &group,
                                 Quantizer &quantizer, Value &whole);
  /// Each tile's codes of `group` packed into its words (kvq.pack).
  void storeChannelCodes(const ChannelGroup &group, Quantizer &quantizer,
                         const GroupParams &params, Value whole);
  /// Runs `body(start, acc)` for each full tile of the slice's groups,
  /// `start` its first channel (index), carrying `inits`: a loop where
  /// there are several, so that one tile's registers are live at a time
  /// (LLVM would keep an unrolled group's tiles between the passes).
  SmallVector<Value>
  forEachTile(const GroupTiles &tiles, ValueRange inits,
              function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Quantizes channel `c`'s group of a block of tokens, token k's row
  /// `rowOf(k)`, into the block's rows of `codes` (null: the layer shares
  /// another's), `scales` and `zeros` (null: sym). `unrolled`: the codes
  /// are computed and packed all at once (one store of the group's words),
  /// else a chunk that fills whole words at a time (fewer rows live: a
  /// GPU thread that looks each row up keeps only a chunk's addresses).
  void quantizeChannel(Value c, function_ref<Value(Value)> rowOf, bool unrolled,
                       const GroupRows &rows);
  /// Stores a group's parameters at element `at` of `rows` and counts it
  /// if they saturated.
  void storeParams(Quantizer &quantizer, const GroupParams &params,
                   const GroupRows &rows, Value at);

  ProgramBuilder pb;
  const CacheLayout &layout;
  ModelAttr model;
  const KernelSpec &spec;
  const TensorLayout &tensor;
  const SliceLayout &slice;
  unsigned flush, dim;
  func::FuncOp func;
  Value unit, head;
  FlushSource source;
  /// The tokens being quantized: `tokens` from `firstToken`.
  Value firstToken;
  unsigned tokens = 0;
  /// A rotated slice: the block-local rows of the chunk's rotated tokens,
  /// and their number.
  Value rotated;
  unsigned chunk = 0;
  /// The slice's channel tables (`memref.global`s), where it has them.
  std::optional<ChannelTables> tables;
};

} // namespace

void FlushProgram::forEachToken(unsigned count,
                                function_ref<void(Value)> body) {
  if (count == 1)
    return body(pb.i32(0));
  pb.parallelFor(count, [&](Value t) { body(pb.indexToI32(t)); });
}

Value FlushProgram::sourceRow(Value token) {
  auto [buffer, row] = source.row(pb, model, token, head);
  return pb.row(buffer, row, dim);
}

Value FlushProgram::tokenRow(Value token) {
  if (!rotated)
    return sourceRow(token);
  return pb.row(rotated, pb.mul(pb.sub(token, firstToken), pb.i32(dim)), dim);
}

Value FlushProgram::sliceAt(Value qpos) {
  Value page =
      pb.loadElement(arg(A::Table), pb.divU(qpos, pb.i32(layout.pageTokens)));
  return sliceByteOffset(pb, tensor, slice, page, head);
}

void FlushProgram::flagNonFinite(Value x) { flag(pb.isNonFinite(x)); }

void FlushProgram::flag(Value bad) {
  pb.ifThen(pb.anyLane(bad),
            [&] { pb.storeElement(pb.i32(1), arg(A::NonFinite), pb.i32(0)); });
}

/// Token by token, a row of the slice's page is the token's row as
/// appended.
void FlushProgram::buildFullPrecision() {
  Type dtype = model.getDtype();
  forEachToken(flush, [&](Value t) {
    Value token = pb.add(pb.mul(unit, pb.i32(flush)), t);
    Value src = sourceRow(token);
    Value qpos = pb.add(arg(A::DestPos), token);
    Value data = pb.view(arg(A::Pages), sliceAt(qpos), dtype,
                         int64_t(layout.pageTokens) * dim);
    Value dst = pb.row(
        data, pb.mul(pb.remU(qpos, pb.i32(layout.pageTokens)), pb.i32(dim)),
        dim);
    pb.parallelFor(dim, [&](Value c) {
      Value x = pb.loadElement(src, c);
      flagNonFinite(pb.asF32(x));
      pb.storeElement(x, dst, c);
    });
  });
}

FlushProgram::GroupRows FlushProgram::groupRows(Value base, Value n0,
                                                unsigned count, Value word,
                                                unsigned words) {
  Type bitsType = Quantizer(pb, slice.quant).getParamBitsType();
  auto paramRow = [&](uint64_t offset) {
    Value params = pb.view(arg(A::Pages), pb.add(base, pb.i64(offset)),
                           bitsType, slice.GroupsPerPage);
    return pb.row(params, n0, count);
  };
  GroupRows rows;
  rows.scales = paramRow(slice.ScalesOffset);
  if (slice.hasZeros())
    rows.zeros = paramRow(slice.ZerosOffset);
  if (!slice.sharesCodes())
    rows.codes = pb.row(pb.view(arg(A::Pages), base, pb.builder().getI32Type(),
                                slice.CodesBytes / 4),
                        word, words);
  if (slice.quant.getKeyNorm())
    rows.norms = pb.row(arg(A::Norms), pb.mul(head, pb.i32(dim)), dim);
  return rows;
}

/// Block by block of `group` tokens, channel c's group is quantized by
/// iteration c: its parameters from one pass over the tokens (which checks
/// them), its codes from a second, packed into its words.
void FlushProgram::buildTokenGroups() {
  unsigned group = slice.quant.getGroup();
  forEachToken(tokens / group, [&](Value block) {
    Value token = pb.add(firstToken, pb.mul(block, pb.i32(group)));
    Value qpos = pb.add(arg(A::DestPos), token);
    // The block's groups in the page: a row of `dim` from group n0.
    Value n0 =
        pb.mul(pb.divU(pb.remU(qpos, pb.i32(layout.pageTokens)), pb.i32(group)),
               pb.i32(dim));
    unsigned words = slice.WordsPerGroup;
    GroupRows rows = groupRows(sliceAt(qpos), n0, dim,
                               pb.mul(n0, pb.i32(words)), dim * words);
    // The channels' groups, token k's row of the block given by `rowOf`.
    auto quantizeChannels = [&](function_ref<Value(Value)> rowOf,
                                bool unrolled) {
      pb.parallelFor(
          dim, [&](Value c) { quantizeChannel(c, rowOf, unrolled, rows); });
      return SmallVector<Value>();
    };
    // Rotated tokens are consecutive rows of block-local memory.
    if (rotated) {
      quantizeChannels([&](Value k) { return tokenRow(pb.add(token, k)); },
                       /*unrolled=*/true);
      return;
    }
    // The block's tokens are consecutive rows of one buffer unless they
    // cross the ring's end or its boundary with the input: then each
    // token's row is looked up, else one address serves the block.
    // (Offsets from row0 in index arithmetic, which LLVM folds into the
    // addresses' constant offsets where k is a constant; i32 arithmetic
    // extended after would take a register per row.)
    auto [buffer0, row0] = source.row(pb, model, token, head);
    Value first = pb.toIndex(row0);
    Value stride = pb.index(model.getKvHeads() * dim);
    pb.ifThenElse(
        source.isContiguous(pb, token, group), {},
        [&] {
          return quantizeChannels(
              [&](Value k) {
                return pb.row(
                    buffer0, pb.add(first, pb.mul(pb.toIndex(k), stride)), dim);
              },
              /*unrolled=*/true);
        },
        [&] {
          return quantizeChannels(
              [&](Value k) { return tokenRow(pb.add(token, k)); },
              /*unrolled=*/false);
        });
  });
}

void FlushProgram::quantizeChannel(Value c, function_ref<Value(Value)> rowOf,
                                   bool unrolled, const GroupRows &rows) {
  Value norms = rows.norms, codes = rows.codes;
  QuantAttr quant = slice.quant;
  unsigned group = quant.getGroup(), words = slice.WordsPerGroup;
  Quantizer quantizer(pb, quant);
  if (tables && tables->hasClipTable())
    quantizer.setClip(tables->clipFactor(pb.indexToI32(c)));
  auto load = [&](Value k, bool check) {
    Value x = pb.loadElementAsF32(rowOf(k), c);
    // Rotated rows were checked as they were read (buildRotated).
    if (check && !rotated)
      flagNonFinite(x);
    return norms ? pb.fdiv(x, pb.loadElement(norms, c)) : x;
  };
  // The input is checked by the parameters' pass over it, not the codes'.
  GroupParams params = quantizer.computeParams(
      group, [&](Value k) { return load(k, /*check=*/true); });
  // Codes [first, first + count) packed into their words, stored from word
  // `at` of the group's.
  auto packCodes = [&](Value first, unsigned count, Value at) {
    unsigned bits = quant.getBits();
    SmallVector<Value> packed = packWords(pb, count, bits, [&](unsigned k) {
      Value x = load(pb.add(first, pb.i32(k)), /*check=*/false);
      return quantizer.computeCode(params, x);
    });
    OpBuilder &b = pb.builder();
    Value row = vector::FromElementsOp::create(
        b, pb.getLoc(),
        VectorType::get({int64_t(packed.size())}, b.getI32Type()), packed);
    Value groupWord = arith::MulIOp::create(b, pb.getLoc(), c, pb.index(words));
    pb.storeVector(row, codes, at ? pb.add(groupWord, at) : groupWord);
  };
  if (codes && unrolled) {
    packCodes(pb.i32(0), group, Value());
  } else if (codes) {
    // Chunks of codes that fill whole words, one at a time, then the rest.
    unsigned bits = quant.getBits();
    unsigned chunk = std::lcm(bits, 32u) / bits, chunkWords = chunk * bits / 32;
    unsigned chunks = group / chunk;
    if (chunks)
      pb.forEach(pb.i32(0), pb.i32(chunks), [&](Value j) {
        packCodes(pb.mul(j, pb.i32(chunk)), chunk,
                  pb.toIndex(pb.mul(j, pb.i32(chunkWords))));
      });
    if (group % chunk)
      packCodes(pb.i32(chunks * chunk), group % chunk,
                pb.index(chunks * chunkWords));
  }
  storeParams(quantizer, params, rows, c);
}

void FlushProgram::storeParams(Quantizer &quantizer, const GroupParams &params,
                               const GroupRows &rows, Value at) {
  pb.storeElement(quantizer.paramBits(params.scale), rows.scales, at);
  if (rows.zeros)
    pb.storeElement(quantizer.paramBits(params.zero), rows.zeros, at);
  // Saturated parameters are finite but not accurate: count the group.
  pb.ifThen(params.saturated,
            [&] { pb.atomicAdd(pb.i32(1), arg(A::Saturated), pb.i32(0)); });
}

/// Token by token, group g of the token is quantized by iteration g: its
/// parameters from one pass over its tiles (which checks them), its codes
/// from a second, each tile's packed into its words.
void FlushProgram::buildChannelGroups() {
  unsigned groups = slice.GroupsPerToken;
  forEachToken(tokens, [&](Value t) {
    Value token = pb.add(firstToken, t);
    Value row = tokenRow(token);
    Value qpos = pb.add(arg(A::DestPos), token);
    // The token's groups in the page: `groups` from group n0.
    Value pageToken = pb.remU(qpos, pb.i32(layout.pageTokens));
    Value n0 = pb.mul(pageToken, pb.i32(groups));
    // With reorder a token's groups take WordsPerToken words (GroupWords).
    unsigned words =
        slice.hasReorder() ? slice.WordsPerToken : groups * slice.WordsPerGroup;
    GroupRows rows = groupRows(sliceAt(qpos), n0, groups,
                               pb.mul(pageToken, pb.i32(words)), words);
    pb.parallelFor(groups, [&](Value g) {
      if (slice.hasReorder())
        return quantizeReorderedGroup(g, row, rows);
      Value clip;
      if (tables && tables->hasClipTable())
        clip = tables->clipFactor(pb.indexToI32(g));
      quantizeChannelGroup({g, row, pb.mul(g, pb.index(slice.quant.getGroup())),
                            rows, GroupTiles(slice.quant), clip});
    });
  });
}

Value FlushProgram::loadTile(const ChannelGroup &group, Value start,
                             unsigned size, bool check) {
  Value at = pb.add(group.first, start);
  Value x = size == 1 ? pb.loadElementAsF32(group.row, at)
                      : pb.loadVectorAsF32(group.row, at, size);
  // A lane that is not finite (the flush is then rejected) reads as 0 for
  // the parameters: the extrema are then of lanes never NaN (key norms are
  // positive and finite), which every target's min and max reduce exactly.
  // Rotated rows were checked as they were read (buildRotated).
  if (check) {
    Value bad = pb.isNonFinite(x);
    if (!rotated)
      flag(bad);
    x = pb.select(bad, pb.f32Like(x, 0), x);
  }
  Value norms = group.rows.norms;
  if (!norms)
    return x;
  return pb.fdiv(x, size == 1 ? pb.loadElement(norms, at)
                              : pb.loadVectorAsF32(norms, at, size));
}

SmallVector<Value> FlushProgram::forEachTile(
    const GroupTiles &tiles, ValueRange inits,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  if (tiles.count == 1)
    return body(pb.index(0), inits);
  return pb.forLoop(pb.i32(0), pb.i32(tiles.count), pb.i32(1), inits,
                    [&](Value j, ValueRange acc) {
                      return body(pb.toIndex(pb.mul(j, pb.i32(tiles.size))),
                                  acc);
                    });
}

GroupParams FlushProgram::channelGroupParams(const ChannelGroup &group,
                                             Quantizer &quantizer,
                                             Value &whole) {
  QuantAttr quant = slice.quant;
  const GroupTiles &tiles = group.tiles;
  // Hybrid's squared errors are summed in index order: element by element.
  if (quant.getMode() == Mode::Hybrid)
    return quantizer.computeParams(quant.getGroup(), [&](Value k) {
      return loadTile(group, pb.toIndex(k), 1, /*check=*/true);
    });
  // The range (asym) or the largest magnitude (sym): lane by lane over the
  // full tiles, then across the lanes, then with the rest. stat i combines
  // by combiners[i] and reduces across lanes by reducers[i].
  bool asym = quant.getMode() == Mode::Asym;
  auto min = [&](Value x, Value y) { return pb.selectMin(x, y); };
  auto max = [&](Value x, Value y) { return pb.selectMax(x, y); };
  auto reduceMin = [&](Value x) { return pb.reduceMin(x); };
  auto reduceMax = [&](Value x) { return pb.reduceMax(x); };
  using Combine = function_ref<Value(Value, Value)>;
  using Reduce = function_ref<Value(Value)>;
  Combine combiners[] = {asym ? Combine(min) : Combine(max), Combine(max)};
  Reduce reducers[] = {asym ? Reduce(reduceMin) : Reduce(reduceMax),
                       Reduce(reduceMax)};
  auto fold = [&](Value x, ValueRange acc) -> SmallVector<Value> {
    SmallVector<Value> stats =
        asym ? SmallVector<Value>{x, x} : SmallVector<Value>{pb.fabs(x)};
    for (auto [i, stat] : llvm::enumerate(stats))
      if (!acc.empty())
        stat = combiners[i](stat, acc[i]);
    return stats;
  };
  SmallVector<Value> inits;
  if (tiles.count > 1) {
    // Starts that every lane replaces.
    double limit = std::numeric_limits<float>::infinity();
    auto splat = [&](double value) {
      return pb.splat(pb.f32(value), tiles.size);
    };
    inits = asym ? SmallVector<Value>{splat(limit), splat(-limit)}
                 : SmallVector<Value>{splat(0)};
  }
  SmallVector<Value> lanes =
      forEachTile(tiles, inits, [&](Value start, ValueRange acc) {
        Value x = loadTile(group, start, tiles.size, /*check=*/true);
        if (tiles.count == 1 && !tiles.rest)
          whole = x;
        return fold(x, acc);
      });
  // A tile of one channel is a scalar already.
  auto reduce = [&](Value x, unsigned i) {
    return isa<VectorType>(x.getType()) ? reducers[i](x) : x;
  };
  SmallVector<Value> stats;
  for (auto [i, x] : llvm::enumerate(lanes))
    stats.push_back(reduce(x, i));
  if (tiles.rest) {
    Value rest = pb.index(tiles.count * tiles.size);
    for (auto [i, x] : llvm::enumerate(
             fold(loadTile(group, rest, tiles.rest, /*check=*/true), {})))
      stats[i] = combiners[i](reduce(x, i), stats[i]);
  }
  return quantizer.paramsFromStats(asym ? GroupStats{stats[0], stats[1], {}}
                                        : GroupStats{{}, {}, stats[0]});
}

void FlushProgram::storeChannelCodes(const ChannelGroup &group,
                                     Quantizer &quantizer,
                                     const GroupParams &params, Value whole) {
  unsigned bits = slice.quant.getBits();
  OpBuilder &b = pb.builder();
  // Tile (start, size)'s codes from word `start * bits / 32` of the
  // group's: tiles fill whole words. The first tile at g * words exactly:
  // the form in which kvq-vectorize-parallel stores a token's groups'
  // codes at once.
  auto store = [&](Value start, unsigned size) {
    GroupParams lanes = params;
    if (size > 1)
      for (Value *v : {&lanes.asymScale, &lanes.asymZero, &lanes.symScale})
        if (*v)
          *v = pb.splat(*v, size);
    Value x = whole ? whole : loadTile(group, start, size, /*check=*/false);
    pb.setLanes(size > 1 ? size : 0);
    Value codes = quantizer.computeCode(lanes, x);
    pb.setLanes(0);
    if (size == 1)
      codes = vector::FromElementsOp::create(
          b, pb.getLoc(), VectorType::get({1}, b.getI32Type()), codes);
    auto type = VectorType::get({int64_t(llvm::divideCeil(size * bits, 32))},
                                b.getI32Type());
    Value packed =
        PackOp::create(b, pb.getLoc(), type, codes, b.getI32IntegerAttr(bits));
    Value at = pb.mul(group.g, pb.index(slice.WordsPerGroup));
    if (!matchPattern(start, m_Zero()))
      at = pb.add(at, pb.divU(pb.mul(start, pb.index(bits)), pb.index(32)));
    pb.storeVector(packed, group.rows.codes, at);
  };
  const GroupTiles &tiles = group.tiles;
  forEachTile(tiles, {}, [&](Value start, ValueRange) {
    store(start, tiles.size);
    return SmallVector<Value>();
  });
  if (tiles.rest)
    store(pb.index(tiles.count * tiles.size), tiles.rest);
}

void FlushProgram::quantizeChannelGroup(const ChannelGroup &group) {
  Quantizer quantizer(pb, slice.quant);
  if (group.clip)
    quantizer.setClip(group.clip);
  Value whole;
  GroupParams params = channelGroupParams(group, quantizer, whole);
  if (group.rows.codes)
    storeChannelCodes(group, quantizer, params, whole);
  storeParams(quantizer, params, group.rows, group.g);
}

/// Packs the `size` (i32) codes of one group, lowest bits first, into
/// 32-bit words: `store(w, word)` writes the group's word w. A loop: the
/// size is known only at run time.
static void packGroup(KernelBuilder &kb, Value size, unsigned bits,
                      function_ref<Value(Value)> code,
                      function_ref<void(Value, Value)> store) {
  Type i64 = kb.builder().getI64Type();
  SmallVector<Value> rest = kb.forLoop(
      kb.i32(0), size, kb.i32(1), {kb.i64(0), kb.i32(0), kb.i32(0)},
      [&](Value k, ValueRange state) -> SmallVector<Value> {
        Value acc =
            kb.bitOr(state[0], kb.shl(kb.toI64(code(k)), kb.toI64(state[1])));
        Value filled = kb.add(state[1], kb.i32(bits));
        Value full = kb.ult(kb.i32(31), filled);
        return kb.ifThenElse(
            full, {i64, filled.getType(), filled.getType()},
            [&]() -> SmallVector<Value> {
              store(state[2], kb.toI32(acc));
              return {kb.shrU(acc, kb.i64(32)), kb.sub(filled, kb.i32(32)),
                      kb.add(state[2], kb.i32(1))};
            },
            [&]() -> SmallVector<Value> {
              return {acc, filled, state[2]};
            });
      });
  // The partial last word, if any.
  kb.ifThen(kb.ult(kb.i32(0), rest[1]),
            [&] { store(rest[2], kb.toI32(rest[0])); });
}

void FlushProgram::quantizeReorderedGroup(Value g, Value row,
                                          const GroupRows &rows) {
  Value n = pb.indexToI32(g);
  Value size = tables->groupSize(n), start = tables->groupStart(n);
  Quantizer quantizer(pb, slice.quant);
  if (tables->hasClipTable())
    quantizer.setClip(tables->clipFactor(n));
  // Element k is channel channelAt(start + k) of the token.
  auto load = [&](Value k, bool check) {
    Value channel = tables->channelAt(pb.add(start, k));
    Value x = pb.loadElementAsF32(row, channel);
    if (check)
      flagNonFinite(x);
    return rows.norms ? pb.fdiv(x, pb.loadElement(rows.norms, channel)) : x;
  };
  // The input is checked by the parameters' pass over it, not the codes'.
  GroupParams params = quantizer.computeParams(
      size, [&](Value k) { return load(k, /*check=*/true); });
  if (rows.codes) {
    Value first = tables->groupWord(n);
    packGroup(
        pb, size, slice.quant.getBits(),
        [&](Value k) {
          return quantizer.computeCode(params, load(k, /*check=*/false));
        },
        [&](Value w, Value word) {
          pb.storeElement(word, rows.codes, pb.add(first, w));
        });
  }
  storeParams(quantizer, params, rows, g);
}

void FlushProgram::buildQuantized() {
  if (slice.quant.getSpan() == Span::Channels)
    buildChannelGroups();
  else
    buildTokenGroups();
}

void FlushProgram::buildRotated() {
  auto rotateChunk = [&](Value k) {
    firstToken = pb.add(pb.mul(unit, pb.i32(flush)), pb.mul(k, pb.i32(chunk)));
    tokens = chunk;
    OpBuilder &b = pb.builder();
    std::optional<unsigned> seed = slice.quant.getRotateSeed();
    auto rotate = HadamardOp::create(
        b, pb.getLoc(), rotated, b.getI64IntegerAttr(dim),
        seed ? b.getI64IntegerAttr(*seed) : IntegerAttr(), UnitAttr());
    // The chunk's tokens read where they are, as f32, checked as they are
    // read.
    {
      OpBuilder::InsertionGuard guard(b);
      Block *input = b.createBlock(&rotate.getInput(), {},
                                   {b.getIndexType(), b.getIndexType()},
                                   {pb.getLoc(), pb.getLoc()});
      Value token = pb.add(firstToken, pb.indexToI32(input->getArgument(0)));
      Value x = pb.loadElementAsF32(sourceRow(token), input->getArgument(1));
      flagNonFinite(x);
      YieldOp::create(b, pb.getLoc(), x);
    }
    buildQuantized();
  };
  if (flush == chunk)
    return rotateChunk(pb.i32(0));
  pb.forEach(pb.i32(0), pb.i32(flush / chunk), rotateChunk);
}

void FlushProgram::build(StringRef name) {
  OpBuilder &b = pb.builder();
  Type i32 = b.getI32Type(), dtype = model.getDtype();
  SmallVector<Type> args(A::NumArgs, i32);
  args[A::Window] = ProgramBuilder::getBufferType(dtype);
  args[A::Input] = ProgramBuilder::getBufferType(dtype);
  args[A::Pages] = ProgramBuilder::getBufferType(b.getI8Type());
  args[A::Table] = ProgramBuilder::getBufferType(i32);
  args[A::Norms] = ProgramBuilder::getBufferType(b.getF32Type());
  args[A::Saturated] = ProgramBuilder::getBufferType(i32);
  args[A::NonFinite] = ProgramBuilder::getBufferType(i32);
  OpBuilder::InsertionGuard guard(b);
  func = pb.createProgram(name, args);
  unit = pb.getBlockId(gpu::Dimension::x);
  head = pb.getBlockId(gpu::Dimension::y);
  if (hasChannelTables(slice))
    tables.emplace(pb, layout, KernelLayers{spec.layers, arg(A::TableRow)},
                   spec.isKeys, head,
                   [this](StringRef name, Value index,
                          function_ref<SmallVector<int32_t>()> build) {
                     return pb.loadConstant(name, index, build);
                   });
  source = {arg(A::Window), arg(A::Input), arg(A::WindowHead),
            arg(A::WindowTokens), tensor.windowCapacity};
  // A block past the flush's units (the GPU entry runs several a block:
  // kvq.unit_tasks) moves nothing.
  Value units = pb.divU(arg(A::NumTokens), pb.i32(flush));
  bool channels =
      slice.isQuantized() && slice.quant.getSpan() == Span::Channels;
  bool isRotated = slice.isQuantized() && slice.quant.isRotated();
  if (isRotated) {
    chunk = getRotatedChunkTokens(slice.quant, dim, flush);
    rotated = pb.allocBlockLocal(b.getF32Type(), int64_t(chunk) * dim);
  }
  pb.ifThen(pb.ult(unit, units), [&] {
    if (!slice.isQuantized())
      return buildFullPrecision();
    if (isRotated)
      return buildRotated();
    firstToken = pb.mul(unit, pb.i32(flush));
    tokens = flush;
    buildQuantized();
  });
  // A rotated slice's block rotates one unit in its memory: one a block.
  unsigned tasks = !slice.isQuantized() ? flush * dim
                   : channels           ? flush * slice.GroupsPerToken
                                        : flush / slice.quant.getGroup() * dim;
  if (!isRotated)
    func->setAttr("kvq.unit_tasks", b.getI64IntegerAttr(tasks));
  func::ReturnOp::create(b, pb.getLoc());
}

void kvq::buildFlushProgram(OpBuilder &b, Location loc, const KernelSpec &spec,
                            const CacheLayout &layout) {
  FlushProgram(b, loc, layout, spec).build(spec.name);
}
