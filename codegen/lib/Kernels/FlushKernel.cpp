//===- FlushKernel.cpp - quantize and pack flushed tokens -----------------===//
//
// The flush of a slice with channel tables (SKVQ's reorder or per-group clip
// factors): block (b, h) moves flush units b x U .. b x U + U - 1 of
// kv-head h into the pages (U = getBlockUnits: 1 on the CPU, more on the GPU
// where a unit has fewer tasks than the block has threads). The tokens are
// read where they are: the oldest from the sequence's window ring, the rest
// from a linear input buffer (FlushSource). Each thread quantizes whole
// groups, so a group's parameters and codes are computed by one thread in
// index order: the arithmetic, and the bits, are those of the reference on
// every target. The flush program (FlushProgram.cpp) moves every other
// slice.
//
//===----------------------------------------------------------------------===//

#include "ChannelTables.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

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
  /// Flushed token `token`'s row: its buffer and the element offset of
  /// its channel 0 there.
  std::pair<Value, Value> tokenRow(Value token);

  KernelBuilder &kb;
  const CacheLayout &layout;
  const TensorLayout &tensor;
  const SliceLayout &slice;
  FlushArgs args;
  /// blockId.x, and the unit the code being emitted moves.
  Value blockUnit, unit, head;
  ChannelTables tables;
  unsigned unitsPerBlock = 1;
};
} // namespace

void FlushEmitter::forEachUnitTask(unsigned tasks,
                                   function_ref<void(Value)> body) {
  KernelTarget &target = kb.getTarget();
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
  Value x = kb.loadFloat(layout.model.getDtype(), buffer, kb.add(row, channel),
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
    if (check)
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

std::pair<Value, Value> FlushEmitter::tokenRow(Value token) {
  return args.source.row(kb, layout.model, token, head);
}

void FlushEmitter::emit() {
  // Only slices with channel tables are emitted here; the flush program
  // (FlushProgram.cpp) moves the others.
  assert(hasChannelTables(slice) && "the flush program moves the slice");
  emitQuantized();
}

unsigned kvq::emitFlushKernel(KernelBuilder &kb, const KernelEntry &entry,
                              const CacheLayout &layout,
                              ArrayRef<int64_t> layers, bool isKeys) {
  FlushEmitter emitter(kb, entry, layout, layers, isKeys);
  emitter.emit();
  return emitter.getUnitsPerBlock();
}
