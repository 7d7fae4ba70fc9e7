//===- FlushKernel.cpp - quantize and pack flushed tokens -----------------===//
//
// Block (b, h) moves flush units b x U .. b x U + U - 1 of kv-head h into
// the pages (U = getBlockUnits: 1 on the CPU, more on the GPU where a unit
// has fewer tasks than the block has threads). The tokens
// are read where they are: the oldest from the sequence's window ring, the
// rest from a linear input buffer (FlushSource); a rotated slice's tokens
// are first rotated into block-local memory, a chunk of the unit at a time
// (one unit a block), and read there. Each thread quantizes whole
// groups, so a group's parameters and codes are computed by one thread in index
// order: the arithmetic, and the bits, are those of the reference on every
// target. Only rotated slices and slices with channel tables are flushed
// here; the flush program (FlushProgram.cpp) moves the others.
//
//===----------------------------------------------------------------------===//

#include "ChannelTables.h"
#include "Rotation.h"

#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

using namespace mlir;
using namespace kvq;

namespace {
/// The arguments of kvq/ABI/KernelABI.h.
struct FlushArgs {
  using A = abi::FlushArgs;
  Value pages, table, norms, saturated, nonFinite, destPos, numTokens, tableRow;
  FlushSource source;
  FlushArgs(const KernelEntry &e, unsigned capacity)
      : pages(e.args[A::Pages]), table(e.args[A::Table]),
        norms(e.args[A::Norms]), saturated(e.args[A::Saturated]),
        nonFinite(e.args[A::NonFinite]), destPos(e.args[A::DestPos]),
        numTokens(e.args[A::NumTokens]),
        tableRow(e.args[A::TableRow]), source{
                                           e.args[A::Window], e.args[A::Input],
                                           e.args[A::WindowHead],
                                           e.args[A::WindowTokens], capacity} {}
};

/// Where one group of the flush unit lives: in the flushed tokens (element
/// `k` is channel `channel + k` of `token`, or for span = tokens channel
/// `channel` of token `token + k`) and in the pages (quantized position
/// `qpos`, group index `n` of its slice).
struct GroupPlace {
  Value token, channel;
  bool tokenStep = false;
  /// span = channels: the token's buffer and the element offset of its row.
  Value buffer, row;
  Value qpos, n;
  /// Per-group clip table: the group's factor.
  Value clip;
  /// Channel reorder: the group's size, first position and first word in
  /// the pages; element k is channel channelAt(start + k) of the token.
  Value size, start, word;
};

/// A group of a span=channels flush in the vector form: where it is, its
/// elements as chunks of lanes, and their statistics combined chunk by chunk
/// (vectors of lanes, not yet across lanes).
struct LaneGroup {
  GroupPlace place;
  SmallVector<Value> xs;
  GroupStats stats;
  /// Lane by lane, whether an element read (before any key norm) is not
  /// finite.
  Value nonFinite;
};

/// Emits the flush kernel of one slice: block (b, h) moves its flush units
/// of kv-head h into the pages. The scalar forms serve every target; the CPU's
/// vector forms are used where the target's lanes allow.
class FlushEmitter {
public:
  FlushEmitter(KernelBuilder &kb, const KernelEntry &entry,
               const CacheLayout &layout, ArrayRef<int64_t> layers, bool isKeys)
      : kb(kb), layout(layout), tensor(layout.get(isKeys)),
        slice(tensor.layers[layers.front()]),
        args(entry, tensor.windowCapacity), blockUnit(entry.blockId[0]),
        unit(entry.blockId[0]), head(entry.blockId[1]),
        tables(kb, layout, KernelLayers{layers, args.tableRow}, isKeys,
               entry.blockId[1]) {}

  void emit();
  /// The flush units a block moves (getBlockUnits), once emitted.
  unsigned getUnitsPerBlock() const { return unitsPerBlock; }

private:
  /// Runs `body(task)` for the `tasks` tasks of each flush unit of the
  /// block, spread over its threads: `unit` is the task's unit, and units
  /// past the flush's are skipped.
  void forEachUnitTask(unsigned tasks, function_ref<void(Value)> body);
  /// Group `g` of the flush unit.
  GroupPlace placeGroup(Value g);
  /// Channel reorder: places group `g` of a token already placed as if
  /// groups had the nominal size.
  void placeReorderedGroup(GroupPlace &place, Value g);
  /// Element `k` of a placed group (model dtype) and its channel.
  std::pair<Value, Value> loadElement(const GroupPlace &place, Value k);
  /// Sets the NonFinite flag where `bad` (i1, or a vector of them) is set:
  /// the runtime then rejects the append and undoes the flush
  /// (docs/Reliability.md).
  void flagNonFinite(Value bad);
  /// Quantizes group `g` of the flush unit in the scalar form.
  void quantizeGroup(Value g);
  void emitQuantized();
  /// A rotated slice: rotates chunk `k` of the block's flush unit into
  /// `rotated` (getRotatedChunkTokens tokens from chunkStart).
  void rotateChunk(Value k, unsigned chunk);
  /// Flushed token `token`'s row as the quantizer reads it: its buffer and
  /// the element offset of its channel 0 there (rowType elements, rows
  /// rowStride apart within a buffer): the token as appended, or its
  /// rotated row in block-local memory.
  std::pair<Value, Value> tokenRow(Value token);
  Type rowType();
  unsigned rowStride() const;
  void emitTokenBlockLanes(unsigned lanes);
  void emitChannelGroupLanes(unsigned lanes);
  // The span=channels vector form's pieces.
  /// Group `g`'s chunks of `lanes` elements and their statistics.
  LaneGroup loadLaneGroup(Value g, unsigned lanes);
  /// A loaded group's codes, a vector per chunk (parameters: scalars).
  SmallVector<Value> computeLaneCodes(const LaneGroup &group,
                                      Quantizer &quantizer,
                                      const GroupParams &params,
                                      unsigned lanes);
  /// Stores a loaded group's codes and parameters (scalars).
  void storeLaneGroup(const LaneGroup &group, Quantizer &quantizer,
                      const GroupParams &params, unsigned lanes);
  /// Whether the `count` (> 1) groups of a token pack their codes together:
  /// a chunk of `lanes` codes fills one word, and the token's chunks fold
  /// into one vector.
  bool packsTokenWords(unsigned count, unsigned lanes) const;
  /// Whether a group's stream fills its words, so that consecutive groups'
  /// streams are their words back to back.
  bool groupsFillWords() const;
  /// Whether the `count` groups of a token are stored at once
  /// (storeTokenGroups).
  bool storesTokenGroups(unsigned count, unsigned lanes) const;
  /// Stores a token's groups (`params`: vectors of groups) at once, one
  /// store for the codes and one for each parameter. The codes: each
  /// chunk's shifted to their bits and every chunk ORed across its lanes by
  /// one fold (combineEach) into the token's words where a chunk fills a
  /// word, else the token's codes packed as one stream (kvq.pack).
  void storeTokenGroups(ArrayRef<LaneGroup> groups, Quantizer &quantizer,
                        const GroupParams &params, unsigned lanes);
  /// Quantizes groups [first, first + count), their parameters computed as
  /// the lanes of one vector.
  void quantizeLaneGroups(Value first, unsigned count, unsigned lanes);

  KernelBuilder &kb;
  const CacheLayout &layout;
  const TensorLayout &tensor;
  const SliceLayout &slice;
  FlushArgs args;
  /// blockId.x, and the unit the code being emitted moves.
  Value blockUnit, unit, head;
  ChannelTables tables;
  unsigned unitsPerBlock = 1;
  /// A rotated slice: the block-local rows of the rotated tokens from
  /// `chunkStart` (a token of the flush, as GroupPlace::token).
  Value rotated, chunkStart;
};
} // namespace

void FlushEmitter::forEachUnitTask(unsigned tasks,
                                   function_ref<void(Value)> body) {
  KernelTarget &target = kb.getTarget();
  if (slice.isQuantized() && slice.quant.isRotated()) {
    // A unit a block, a chunk of tokens at a time: every form orders its
    // tasks by token, so a chunk's tasks are consecutive.
    unsigned flush = tensor.window.getFlush();
    unsigned chunk =
        getRotatedChunkTokens(slice.quant, layout.model.getHeadDim(), flush);
    unsigned chunkTasks = tasks / (flush / chunk);
    rotated =
        target.allocShared(kb, uint64_t(chunk) * layout.model.getHeadDim() * 4);
    return kb.forEach(kb.i32(0), kb.i32(flush / chunk), [&](Value k) {
      rotateChunk(k, chunk);
      target.parallelFor(kb, kb.i32(chunkTasks), [&](Value t) {
        body(kb.add(kb.mul(k, kb.i32(chunkTasks)), t));
      });
    });
  }
  unitsPerBlock = getBlockUnits(target.getInfo(), tasks);
  if (unitsPerBlock == 1)
    return target.parallelFor(kb, kb.i32(tasks), body);
  Value first = kb.mul(blockUnit, kb.i32(unitsPerBlock));
  Value units = kb.divU(args.numTokens, kb.i32(tensor.window.getFlush()));
  target.parallelFor(kb, kb.i32(unitsPerBlock * tasks), [&](Value i) {
    unit = kb.add(first, kb.divU(i, kb.i32(tasks)));
    kb.ifThen(kb.ult(unit, units), [&] { body(kb.remU(i, kb.i32(tasks))); });
  });
}

GroupPlace FlushEmitter::placeGroup(Value g) {
  ModelAttr model = layout.model;
  unsigned dim = model.getHeadDim(), group = slice.quant.getGroup();
  unsigned flush = tensor.window.getFlush();
  Value unitStart = kb.mul(unit, kb.i32(flush));
  GroupPlace place;
  Value token, channel;
  if (slice.quant.getSpan() == Span::Channels) {
    // One token across `group` channels.
    token = kb.add(unitStart, kb.divU(g, kb.i32(slice.GroupsPerToken)));
    channel = kb.mul(kb.remU(g, kb.i32(slice.GroupsPerToken)), kb.i32(group));
    place.qpos = kb.add(args.destPos, token);
    Value pageToken = kb.remU(place.qpos, kb.i32(layout.pageTokens));
    place.n = kb.add(kb.mul(pageToken, kb.i32(slice.GroupsPerToken)),
                     kb.remU(g, kb.i32(slice.GroupsPerToken)));
    std::tie(place.buffer, place.row) = tokenRow(token);
  } else {
    // One channel across `group` tokens.
    token = kb.add(unitStart, kb.mul(kb.divU(g, kb.i32(dim)), kb.i32(group)));
    channel = kb.remU(g, kb.i32(dim));
    place.tokenStep = true;
    place.qpos = kb.add(args.destPos, token);
    Value block =
        kb.divU(kb.remU(place.qpos, kb.i32(layout.pageTokens)), kb.i32(group));
    place.n = kb.add(kb.mul(block, kb.i32(dim)), channel);
  }
  place.token = token;
  place.channel = channel;
  if (tables.hasClipTable())
    place.clip =
        tables.clipFactor(slice.quant.getSpan() == Span::Channels
                              ? kb.remU(g, kb.i32(slice.GroupsPerToken))
                              : channel);
  if (tables.hasReorder())
    placeReorderedGroup(place, kb.remU(g, kb.i32(slice.GroupsPerToken)));
  return place;
}

void FlushEmitter::placeReorderedGroup(GroupPlace &place, Value g) {
  // Channels come from the table, whatever `g * group` placed above.
  place.channel = kb.i32(0);
  place.size = tables.groupSize(g);
  place.start = tables.groupStart(g);
  Value pageToken = kb.remU(place.qpos, kb.i32(layout.pageTokens));
  place.word = kb.add(kb.mul(pageToken, kb.i32(slice.WordsPerToken)),
                      tables.groupWord(g));
}

void FlushEmitter::flagNonFinite(Value bad) {
  kb.ifThen(kb.anyLane(bad),
            [&] { kb.store(kb.i32(1), args.nonFinite, kb.i64(0), 4); });
}

std::pair<Value, Value> FlushEmitter::loadElement(const GroupPlace &place,
                                                  Value k) {
  Value channel = place.start ? tables.channelAt(kb.add(place.start, k))
                              : (place.tokenStep ? place.channel
                                                 : kb.add(place.channel, k));
  Value buffer = place.buffer, row = place.row;
  if (place.tokenStep)
    std::tie(buffer, row) = tokenRow(kb.add(place.token, k));
  Value x = kb.loadFloat(rowType(), buffer, kb.add(row, channel),
                         /*invariant=*/true);
  return {x, channel};
}

/// Packs the `size` (i32) codes of one group, lowest bits first, into 32-bit
/// words: `store(w, word)` writes the group's word w.
static void packGroup(KernelBuilder &kb, Value size, unsigned bits,
                      llvm::function_ref<Value(Value)> code,
                      llvm::function_ref<void(Value, Value)> store) {
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
  // The partial last word, if any: known at compile time unless the group
  // size varies.
  std::optional<int64_t> constantSize = getConstantIntValue(size);
  if (!constantSize)
    kb.ifThen(kb.ult(kb.i32(0), rest[1]),
              [&] { store(rest[2], kb.toI32(rest[0])); });
  else if ((*constantSize * bits) % 32 != 0)
    store(rest[2], kb.toI32(rest[0]));
}

void FlushEmitter::quantizeGroup(Value g) {
  QuantAttr quant = slice.quant;
  unsigned dim = layout.model.getHeadDim();
  GroupPlace place = placeGroup(g);
  auto load = [&](Value k, bool check) {
    auto [x, channel] = loadElement(place, k);
    // Rotated rows were checked as they were read (rotateChunk).
    if (check && !rotated)
      flagNonFinite(kb.isNonFinite(x));
    if (!quant.getKeyNorm())
      return x;
    Value norm =
        kb.loadF32(args.norms, kb.add(kb.mul(head, kb.i32(dim)), channel),
                   /*invariant=*/true);
    return kb.fdiv(x, norm);
  };
  // The input is checked by the parameters' pass over it, not the codes'.
  auto checked = [&](Value k) { return load(k, /*check=*/true); };
  auto element = [&](Value k) { return load(k, /*check=*/false); };
  Quantizer quantizer(kb, quant);
  if (place.clip)
    quantizer.setClip(place.clip);
  Value size = place.size ? place.size : kb.i32(quant.getGroup());
  GroupParams params = quantizer.computeParams(size, checked);
  SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                     args.table, place.qpos, head);
  // A layer sharing another layer's codes keeps only its own parameters.
  if (!slice.sharesCodes())
    packGroup(
        kb, size, quant.getBits(),
        [&](Value k) { return quantizer.computeCode(params, element(k)); },
        [&](Value w, Value word) {
          if (place.word)
            access.storeCodeWord(kb.add(place.word, w), word);
          else
            access.storeWord(place.n, w, word);
        });
  access.storeScale(place.n, quantizer.paramBits(params.scale));
  access.storeZero(place.n, quantizer.paramBits(params.zero));
  // Saturated parameters are finite but not accurate: count the group.
  kb.ifThen(params.saturated,
            [&] { kb.atomicAddU32(args.saturated, kb.i64(0), kb.i32(1)); });
}

void FlushEmitter::emitQuantized() {
  QuantAttr quant = slice.quant;
  unsigned flush = tensor.window.getFlush();
  unsigned groupsPerUnit =
      quant.getSpan() == Span::Channels
          ? flush * slice.GroupsPerToken
          : flush / quant.getGroup() * layout.model.getHeadDim();
  forEachUnitTask(groupsPerUnit, [&](Value g) { quantizeGroup(g); });
}

/// A rotated slice quantizes R x (docs/Numerics.md, "Hadamard rotation"):
/// its tokens are rotated into block-local memory, whole groups at a time
/// within the GPU's static shared memory, and the forms read them there.
void FlushEmitter::rotateChunk(Value k, unsigned chunk) {
  ModelAttr model = layout.model;
  unsigned flush = tensor.window.getFlush();
  chunkStart = kb.add(kb.mul(unit, kb.i32(flush)), kb.mul(k, kb.i32(chunk)));
  rotateRows(kb, slice.quant, model.getHeadDim(), chunk,
             RotationDirection::Forward, rotated,
             [&](Value row, Value c, unsigned lanes) {
               auto [buffer, first] =
                   args.source.row(kb, model, kb.add(chunkStart, row), head);
               Value index = kb.add(first, c);
               Value x = lanes == 1
                             ? kb.loadFloat(model.getDtype(), buffer, index,
                                            /*invariant=*/true)
                             : kb.loadFloatVector(model.getDtype(), buffer,
                                                  index, lanes,
                                                  /*invariant=*/true);
               flagNonFinite(kb.isNonFinite(x));
               return x;
             });
}

std::pair<Value, Value> FlushEmitter::tokenRow(Value token) {
  if (!rotated)
    return args.source.row(kb, layout.model, token, head);
  Value row = kb.sub(token, chunkStart);
  return {rotated, kb.mul(row, kb.i32(layout.model.getHeadDim()))};
}

Type FlushEmitter::rowType() {
  return rotated ? kb.builder().getF32Type() : layout.model.getDtype();
}

unsigned FlushEmitter::rowStride() const {
  return (rotated ? 1 : layout.model.getKvHeads()) * layout.model.getHeadDim();
}

/// `codes` (i32 lanes below 2^bits) as the `words` words of their stream.
static Value packCodes(KernelBuilder &kb, Value codes, unsigned bits,
                       unsigned words) {
  OpBuilder &b = kb.builder();
  return PackOp::create(b, kb.getLoc(),
                        VectorType::get({int64_t(words)}, b.getI32Type()),
                        codes, b.getI32IntegerAttr(bits));
}

/// The CPU's vector form of a span=tokens flush: a vector's lanes are the
/// groups of consecutive channels of one block, whose elements at one token
/// are contiguous in its row. Every lane runs the scalar
/// quantizer's arithmetic (the same Quantizer, on vectors), so codes and
/// parameters are bit-identical to the one-group-per-thread form.
void FlushEmitter::emitTokenBlockLanes(unsigned lanes) {
  QuantAttr quant = slice.quant;
  ModelAttr model = layout.model;
  unsigned dim = model.getHeadDim(), group = quant.getGroup();
  unsigned flush = tensor.window.getFlush(), chunks = dim / lanes;
  unsigned words = slice.WordsPerGroup;
  Type f32 = kb.builder().getF32Type();
  forEachUnitTask(flush / group * chunks, [&](Value i) {
    Value block = kb.divU(i, kb.i32(chunks));
    Value c0 = kb.mul(kb.remU(i, kb.i32(chunks)), kb.i32(lanes));
    Value token =
        kb.add(kb.mul(unit, kb.i32(flush)), kb.mul(block, kb.i32(group)));
    Value norms;
    if (quant.getKeyNorm())
      norms = kb.loadFloatVector(f32, args.norms,
                                 kb.add(kb.mul(head, kb.i32(dim)), c0), lanes,
                                 /*invariant=*/true);
    // A block's tokens are consecutive rows of one buffer unless they cross
    // the ring's end or its boundary with the input: then each token's row
    // is looked up, else one address serves the block.
    Value buffer0, row0;
    std::tie(buffer0, row0) = tokenRow(token);
    Value stride = kb.i32(rowStride());
    auto quantizeBlock = [&](bool contiguous) {
      auto load = [&](Value k, bool check) {
        Value buffer = buffer0, row = kb.add(row0, kb.mul(k, stride));
        if (!contiguous)
          std::tie(buffer, row) = tokenRow(kb.add(token, k));
        Value x = kb.loadFloatVector(rowType(), buffer, kb.add(row, c0), lanes,
                                     /*invariant=*/true);
        if (check && !rotated)
          flagNonFinite(kb.isNonFinite(x));
        return norms ? kb.fdiv(x, norms) : x;
      };
      // The input is checked by the parameters' pass over it, not the codes'.
      auto checked = [&](Value k) { return load(k, /*check=*/true); };
      auto element = [&](Value k) { return load(k, /*check=*/false); };
      kb.setLanes(lanes);
      Quantizer quantizer(kb, quant);
      GroupParams params = quantizer.computeParams(group, checked);
      Value qpos = kb.add(args.destPos, token);
      SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                         args.table, qpos, head);
      Value pageBlock =
          kb.divU(kb.remU(qpos, kb.i32(layout.pageTokens)), kb.i32(group));
      Value n0 = kb.add(kb.mul(pageBlock, kb.i32(dim)), c0);
      if (!slice.sharesCodes()) {
        SmallVector<Value> packed =
            packWords(kb, group, quant.getBits(), [&](unsigned k) {
              return quantizer.computeCode(params, element(kb.i32(k)));
            });
        // The word vectors concatenated, then interleaved: lane j's words go
        // to group n0 + j.
        Value all = kb.concat(packed);
        SmallVector<int64_t> interleave;
        for (unsigned j = 0; j < lanes; ++j)
          for (unsigned w = 0; w < words; ++w)
            interleave.push_back(w * lanes + j);
        if (words > 1)
          all = kb.shuffle(all, interleave);
        access.storeWord(n0, kb.i32(0), all);
      }
      access.storeScale(n0, quantizer.paramBits(params.scale));
      access.storeZero(n0, quantizer.paramBits(params.zero));
      // Saturated parameters are finite but not accurate: count the
      // groups.
      Value counts = arith::ExtUIOp::create(
          kb.builder(), kb.getLoc(),
          VectorType::get({lanes}, kb.builder().getI32Type()),
          params.saturated);
      kb.setLanes(0);
      Value saturated = vector::ReductionOp::create(
          kb.builder(), kb.getLoc(), vector::CombiningKind::ADD, counts);
      kb.ifThen(kb.ult(kb.i32(0), saturated),
                [&] { kb.atomicAddU32(args.saturated, kb.i64(0), saturated); });
      return SmallVector<Value>();
    };
    // Rotated rows are consecutive.
    if (rotated) {
      quantizeBlock(/*contiguous=*/true);
      return;
    }
    kb.ifThenElse(
        args.source.isContiguous(kb, token, group), {},
        [&] { return quantizeBlock(/*contiguous=*/true); },
        [&] { return quantizeBlock(/*contiguous=*/false); });
  });
}

/// The most groups of a token the vector form quantizes in one loop body.
constexpr unsigned kMaxUnrolledGroups = 8;

/// Lane `i` of each of `params`' values (vectors of groups).
static GroupParams laneOf(KernelBuilder &kb, const GroupParams &params,
                          unsigned i) {
  GroupParams lane = params;
  for (Value *v : {&lane.scale, &lane.zero, &lane.asymScale, &lane.asymZero,
                   &lane.symScale, &lane.saturated})
    if (*v)
      *v = vector::ExtractOp::create(kb.builder(), kb.getLoc(), *v,
                                     ArrayRef<int64_t>{i});
  return lane;
}

LaneGroup FlushEmitter::loadLaneGroup(Value g, unsigned lanes) {
  QuantAttr quant = slice.quant;
  unsigned chunks = quant.getGroup() / lanes;
  unsigned dim = layout.model.getHeadDim();
  Type f32 = kb.builder().getF32Type();
  LaneGroup group{placeGroup(g), {}, {}, {}};
  for (unsigned j = 0; j < chunks; ++j) {
    Value channel = kb.add(group.place.channel, kb.i32(j * lanes));
    Value x = kb.loadFloatVector(rowType(), group.place.buffer,
                                 kb.add(group.place.row, channel), lanes,
                                 /*invariant=*/true);
    // Rotated rows were checked as they were read (rotateChunk).
    if (!rotated) {
      Value bad = kb.isNonFinite(x);
      group.nonFinite = group.nonFinite ? kb.bitOr(group.nonFinite, bad) : bad;
    }
    if (quant.getKeyNorm())
      x = kb.fdiv(x, kb.loadFloatVector(
                         f32, args.norms,
                         kb.add(kb.mul(head, kb.i32(dim)), channel), lanes,
                         /*invariant=*/true));
    group.xs.push_back(x);
  }
  // Min and max as x86's vminps/vmaxps: a NaN (which the NonFinite flag
  // reports) gives some code, as in the scalar form; a zero of either sign
  // is counted as +0 by the quantizer whichever one is kept. The chunks are
  // combined lane by lane here, across lanes by quantizeLaneGroups.
  auto partial = [&](bool isMax, function_ref<Value(Value)> map) {
    Value acc = map(group.xs[0]);
    for (unsigned j = 1; j < chunks; ++j)
      acc = isMax ? kb.selectMax(map(group.xs[j]), acc)
                  : kb.selectMin(map(group.xs[j]), acc);
    return acc;
  };
  auto identity = [](Value x) { return x; };
  if (quant.getMode() == Mode::Asym) {
    group.stats.min = partial(/*isMax=*/false, identity);
    group.stats.max = partial(/*isMax=*/true, identity);
  } else {
    group.stats.absMax =
        partial(/*isMax=*/true, [&](Value x) { return kb.fabs(x); });
  }
  return group;
}

SmallVector<Value> FlushEmitter::computeLaneCodes(const LaneGroup &group,
                                                  Quantizer &quantizer,
                                                  const GroupParams &params,
                                                  unsigned lanes) {
  GroupParams lanesParams = params;
  for (Value *v :
       {&lanesParams.asymScale, &lanesParams.asymZero, &lanesParams.symScale})
    if (*v)
      *v = kb.splat(*v, lanes);
  kb.setLanes(lanes);
  SmallVector<Value> codes;
  for (Value x : group.xs)
    codes.push_back(quantizer.computeCode(lanesParams, x));
  kb.setLanes(0);
  return codes;
}

void FlushEmitter::storeLaneGroup(const LaneGroup &group, Quantizer &quantizer,
                                  const GroupParams &params, unsigned lanes) {
  SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                     args.table, group.place.qpos, head);
  if (!slice.sharesCodes())
    access.storeWord(
        group.place.n, kb.i32(0),
        packCodes(kb,
                  kb.concat(computeLaneCodes(group, quantizer, params, lanes)),
                  slice.quant.getBits(), slice.WordsPerGroup));
  access.storeScale(group.place.n, quantizer.paramBits(params.scale));
  access.storeZero(group.place.n, quantizer.paramBits(params.zero));
}

bool FlushEmitter::packsTokenWords(unsigned count, unsigned lanes) const {
  unsigned chunks = slice.quant.getGroup() / lanes;
  return count > 1 && count == slice.GroupsPerToken &&
         lanes * slice.quant.getBits() == 32 && slice.WordsPerGroup == chunks &&
         KernelBuilder::combinesEach(count * chunks, lanes);
}

bool FlushEmitter::groupsFillWords() const {
  return slice.quant.getGroup() * slice.quant.getBits() ==
         slice.WordsPerGroup * 32;
}

bool FlushEmitter::storesTokenGroups(unsigned count, unsigned lanes) const {
  return packsTokenWords(count, lanes) ||
         (count > 1 && count == slice.GroupsPerToken && groupsFillWords());
}

void FlushEmitter::storeTokenGroups(ArrayRef<LaneGroup> groups,
                                    Quantizer &quantizer,
                                    const GroupParams &params, unsigned lanes) {
  const GroupPlace &first = groups[0].place;
  SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                     args.table, first.qpos, head);
  if (!slice.sharesCodes()) {
    unsigned bits = slice.quant.getBits();
    SmallVector<Value> codes;
    for (auto [i, group] : llvm::enumerate(groups))
      llvm::append_range(codes, computeLaneCodes(group, quantizer,
                                                 laneOf(kb, params, i), lanes));
    Value words;
    if (packsTokenWords(groups.size(), lanes)) {
      // Lane l's code goes to bits [l b, l b + b) of its chunk's word; the
      // token's words in order: group-major, a chunk per word.
      SmallVector<int32_t> places;
      for (unsigned l = 0; l < lanes; ++l)
        places.push_back(int32_t(l * bits));
      Value shifts = kb.vectorI32(places);
      for (Value &chunk : codes)
        chunk = kb.shl(chunk, shifts);
      words = kb.combineEach(codes,
                             [&](Value x, Value y) { return kb.bitOr(x, y); });
    } else {
      words = packCodes(kb, kb.concat(codes), bits,
                        groups.size() * slice.WordsPerGroup);
    }
    access.storeWord(first.n, kb.i32(0), words);
  }
  // The parameters are vectors of the groups.
  kb.setLanes(groups.size());
  access.storeScale(first.n, quantizer.paramBits(params.scale));
  access.storeZero(first.n, quantizer.paramBits(params.zero));
  kb.setLanes(0);
}

void FlushEmitter::quantizeLaneGroups(Value first, unsigned count,
                                      unsigned lanes) {
  OpBuilder &b = kb.builder();
  Location loc = kb.getLoc();
  SmallVector<LaneGroup> groups;
  for (unsigned i = 0; i < count; ++i)
    groups.push_back(loadLaneGroup(kb.add(first, kb.i32(i)), lanes));
  // Each group's lanes combined, the groups' results as one vector.
  auto combine = [&](Value GroupStats::*field, bool isMax) -> Value {
    if (!(groups[0].stats.*field))
      return Value();
    SmallVector<Value> partials;
    for (const LaneGroup &group : groups)
      partials.push_back(group.stats.*field);
    auto extremum = [&](Value x, Value y) {
      return isMax ? kb.selectMax(x, y) : kb.selectMin(x, y);
    };
    if (KernelBuilder::combinesEach(count, lanes))
      return kb.combineEach(partials, extremum);
    SmallVector<Value> values;
    for (Value partial : partials)
      values.push_back(kb.combineEach(partial, extremum));
    auto type = VectorType::get({int64_t(count)}, b.getF32Type());
    return vector::FromElementsOp::create(b, loc, type, values).getResult();
  };
  Value nonFinite;
  for (const LaneGroup &group : groups)
    nonFinite =
        nonFinite ? kb.bitOr(nonFinite, group.nonFinite) : group.nonFinite;
  if (nonFinite)
    flagNonFinite(nonFinite);
  GroupStats stats{combine(&GroupStats::min, /*isMax=*/false),
                   combine(&GroupStats::max, /*isMax=*/true),
                   combine(&GroupStats::absMax, /*isMax=*/true)};
  Quantizer quantizer(kb, slice.quant);
  kb.setLanes(count > 1 ? count : 0);
  GroupParams params = quantizer.paramsFromStats(stats);
  kb.setLanes(0);
  if (storesTokenGroups(count, lanes))
    storeTokenGroups(groups, quantizer, params, lanes);
  else
    for (unsigned i = 0; i < count; ++i)
      storeLaneGroup(groups[i], quantizer,
                     count > 1 ? laneOf(kb, params, i) : params, lanes);
  // The counter counts saturated groups.
  Value total =
      count == 1
          ? kb.select(params.saturated, kb.i32(1), kb.i32(0))
          : vector::ReductionOp::create(
                b, loc, vector::CombiningKind::ADD,
                arith::ExtUIOp::create(
                    b, loc, VectorType::get({int64_t(count)}, b.getI32Type()),
                    params.saturated));
  kb.ifThen(kb.ult(kb.i32(0), total),
            [&] { kb.atomicAddU32(args.saturated, kb.i64(0), total); });
}

/// The CPU's vector form of a span=channels flush (asym and sym): a group's
/// contiguous channels are the lanes. Its range is reduced across lanes
/// (min and max are exact in any order), its codes come from the same
/// Quantizer arithmetic lane by lane, and each word ORs its codes' shifted
/// lanes together. A token's groups compute their parameters together, one
/// group per lane: the same arithmetic, one vector chain instead of a scalar
/// chain per group, and their dependency chains (reduce, divide, round,
/// pack) interleave.
void FlushEmitter::emitChannelGroupLanes(unsigned lanes) {
  unsigned flush = tensor.window.getFlush(), groups = slice.GroupsPerToken;
  if (groups > kMaxUnrolledGroups)
    return forEachUnitTask(flush * groups,
                           [&](Value g) { quantizeLaneGroups(g, 1, lanes); });
  forEachUnitTask(flush, [&](Value token) {
    quantizeLaneGroups(kb.mul(token, kb.i32(groups)), groups, lanes);
  });
}

void FlushEmitter::emit() {
  // Only rotated slices and slices with channel tables are emitted here;
  // the flush program (FlushProgram.cpp) moves the others.
  assert(slice.isQuantized() && "a full-precision flush is a program");
  unsigned lanes = getAppendLanes(kb.getTarget(), layout.model.getHeadDim());
  QuantAttr quant = slice.quant;
  // The vector forms assume groups of one size and one clip factor.
  if (hasChannelTables(slice))
    return emitQuantized();
  if (quant.getSpan() == Span::Tokens)
    return lanes > 1 ? emitTokenBlockLanes(lanes) : emitQuantized();
  // Hybrid compares squared errors summed in index order, which a
  // reduction across a group's lanes would reorder: it keeps the scalar
  // form.
  unsigned groupLanes = getAppendLanes(kb.getTarget(), quant.getGroup());
  if (quant.getMode() != Mode::Hybrid && groupLanes > 1)
    return emitChannelGroupLanes(groupLanes);
  emitQuantized();
}

unsigned kvq::emitFlushKernel(KernelBuilder &kb, const KernelEntry &entry,
                              const CacheLayout &layout,
                              ArrayRef<int64_t> layers, bool isKeys) {
  FlushEmitter emitter(kb, entry, layout, layers, isKeys);
  emitter.emit();
  return emitter.getUnitsPerBlock();
}
