//===- FlushKernel.cpp - quantize and pack flushed tokens -----------------===//
//
// Block (u, h) moves flush unit u of kv-head h from the staging buffer into
// the pages. Each thread quantizes whole groups, so a group's parameters and
// codes are computed by one thread in index order: the arithmetic, and the
// bits, are those of the reference on every target.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

using namespace mlir;
using namespace kvq;

namespace {
/// The arguments of kvq/Support/KernelABI.h.
struct FlushArgs {
  using A = abi::FlushArgs;
  Value staging, pages, table, norms, saturated, destPos, numTokens;
  explicit FlushArgs(const KernelEntry &e)
      : staging(e.args[A::Staging]), pages(e.args[A::Pages]),
        table(e.args[A::Table]), norms(e.args[A::Norms]),
        saturated(e.args[A::Saturated]), destPos(e.args[A::DestPos]),
        numTokens(e.args[A::NumTokens]) {}
};

/// Where one group of the flush unit lives: in the staging buffer (element
/// `k` at `first + k * stride`) and in the pages (quantized position `qpos`,
/// group index `n` of its slice).
struct GroupPlace {
  Value first, stride, channel0, channelStride, qpos, n;
};
} // namespace

/// Group `g` of flush unit `unit`, for kv-head `head`.
static GroupPlace placeGroup(KernelBuilder &kb, const CacheLayout &layout,
                             const TensorLayout &tensor,
                             const SliceLayout &slice, const FlushArgs &args,
                             Value unit, Value head, Value g) {
  ModelAttr model = layout.model;
  unsigned dim = model.getHeadDim(), group = slice.quant.getGroup();
  unsigned flush = tensor.window.getFlush();
  Value unitStart = kb.mul(unit, kb.i32(flush));
  GroupPlace place;
  Value token, channel;
  if (slice.quant.getSpan() == Span::Channels) {
    // One token across `group` channels.
    token = kb.add(unitStart, kb.divU(g, kb.i32(slice.groupsPerToken)));
    channel = kb.mul(kb.remU(g, kb.i32(slice.groupsPerToken)), kb.i32(group));
    place.stride = kb.i32(1);
    place.channelStride = kb.i32(1);
    place.qpos = kb.add(args.destPos, token);
    Value pageToken = kb.remU(place.qpos, kb.i32(layout.pageTokens));
    place.n = kb.add(kb.mul(pageToken, kb.i32(slice.groupsPerToken)),
                     kb.remU(g, kb.i32(slice.groupsPerToken)));
  } else {
    // One channel across `group` tokens.
    token = kb.add(unitStart, kb.mul(kb.divU(g, kb.i32(dim)), kb.i32(group)));
    channel = kb.remU(g, kb.i32(dim));
    place.stride = kb.i32(model.getKvHeads() * dim);
    place.channelStride = kb.i32(0);
    place.qpos = kb.add(args.destPos, token);
    Value block =
        kb.divU(kb.remU(place.qpos, kb.i32(layout.pageTokens)), kb.i32(group));
    place.n = kb.add(kb.mul(block, kb.i32(dim)), channel);
  }
  place.first = kb.add(
      fullPrecisionRow(kb, model, /*capacity=*/0, kb.i32(0), token, head),
      channel);
  place.channel0 = kb.add(kb.mul(head, kb.i32(dim)), channel);
  return place;
}

/// Packs the codes of one group, lowest bits first, into 32-bit words.
static void packGroup(KernelBuilder &kb, SliceAccess &access, Value n,
                      unsigned size, unsigned bits,
                      llvm::function_ref<Value(Value)> code) {
  Type i64 = kb.builder().getI64Type();
  SmallVector<Value> rest = kb.forLoop(
      kb.i32(0), kb.i32(size), kb.i32(1), {kb.i64(0), kb.i32(0), kb.i32(0)},
      [&](Value k, ValueRange state) -> SmallVector<Value> {
        Value acc =
            kb.bitOr(state[0], kb.shl(kb.toI64(code(k)), kb.toI64(state[1])));
        Value filled = kb.add(state[1], kb.i32(bits));
        Value full = kb.ult(kb.i32(31), filled);
        return kb.ifThenElse(
            full, {i64, filled.getType(), filled.getType()},
            [&]() -> SmallVector<Value> {
              access.storeWord(n, state[2], kb.toI32(acc));
              return {kb.shrU(acc, kb.i64(32)), kb.sub(filled, kb.i32(32)),
                      kb.add(state[2], kb.i32(1))};
            },
            [&]() -> SmallVector<Value> {
              return {acc, filled, state[2]};
            });
      });
  if ((size * bits) % 32 != 0)
    access.storeWord(n, rest[2], kb.toI32(rest[0]));
}

static void emitQuantizedFlush(KernelBuilder &kb, const CacheLayout &layout,
                               const TensorLayout &tensor,
                               const SliceLayout &slice, const FlushArgs &args,
                               Value unit, Value head) {
  QuantAttr quant = slice.quant;
  unsigned flush = tensor.window.getFlush();
  unsigned groupsPerUnit =
      quant.getSpan() == Span::Channels
          ? flush * slice.groupsPerToken
          : flush / quant.getGroup() * layout.model.getHeadDim();
  Type dtype = layout.model.getDtype();
  kb.getTarget().parallelFor(kb, kb.i32(groupsPerUnit), [&](Value g) {
    GroupPlace place =
        placeGroup(kb, layout, tensor, slice, args, unit, head, g);
    auto element = [&](Value k) {
      Value x = kb.loadFloat(dtype, args.staging,
                             kb.add(place.first, kb.mul(k, place.stride)),
                             /*invariant=*/true);
      if (!quant.getKeyNorm())
        return x;
      Value channel = kb.add(place.channel0, kb.mul(k, place.channelStride));
      return kb.fdiv(x, kb.loadF32(args.norms, channel, /*invariant=*/true));
    };
    Quantizer quantizer(kb, quant);
    GroupParams params = quantizer.computeParams(quant.getGroup(), element);
    SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                       args.table, place.qpos, head);
    // A layer sharing another layer's codes keeps only its own parameters.
    if (!slice.sharesCodes())
      packGroup(
          kb, access, place.n, quant.getGroup(), quant.getBits(),
          [&](Value k) { return quantizer.computeCode(params, element(k)); });
    access.storeScale(place.n, quantizer.paramBits(params.scale));
    access.storeZero(place.n, quantizer.paramBits(params.zero));
    // Saturated parameters are finite but not accurate: count the group.
    kb.ifThen(params.saturated,
              [&] { kb.atomicAddU32(args.saturated, kb.i64(0), kb.i32(1)); });
  });
}

/// A full-precision tensor copies its tokens into the pages.
static void emitFullPrecisionFlush(KernelBuilder &kb, const CacheLayout &layout,
                                   const TensorLayout &tensor,
                                   const SliceLayout &slice,
                                   const FlushArgs &args, Value unit,
                                   Value head) {
  unsigned dim = layout.model.getHeadDim(), flush = tensor.window.getFlush();
  Type bitsType = kb.builder().getIntegerType(layout.dtypeBytes * 8);
  kb.getTarget().parallelFor(kb, kb.i32(flush * dim), [&](Value e) {
    Value token = kb.add(kb.mul(unit, kb.i32(flush)), kb.divU(e, kb.i32(dim)));
    Value channel = kb.remU(e, kb.i32(dim));
    Value src = kb.add(
        fullPrecisionRow(kb, layout.model, 0, kb.i32(0), token, head), channel);
    Value qpos = kb.add(args.destPos, token);
    SliceAccess access(kb, tensor, slice, layout.pageTokens, args.pages,
                       args.table, qpos, head);
    Value dst = kb.add(
        kb.mul(kb.remU(qpos, kb.i32(layout.pageTokens)), kb.i32(dim)), channel);
    Value bytes = kb.i64(layout.dtypeBytes);
    Value value = kb.load(bitsType, args.staging, kb.mul(kb.toI64(src), bytes),
                          layout.dtypeBytes);
    kb.store(value, access.getBase(), kb.mul(kb.toI64(dst), bytes),
             layout.dtypeBytes);
  });
}

void kvq::emitFlushKernel(KernelBuilder &kb, const KernelEntry &entry,
                          const CacheLayout &layout, unsigned layer,
                          bool isKeys) {
  const TensorLayout &tensor = layout.get(isKeys);
  const SliceLayout &slice = tensor.layers[layer];
  FlushArgs args(entry);
  Value unit = entry.blockId[0], head = entry.blockId[1];
  if (slice.isQuantized())
    emitQuantizedFlush(kb, layout, tensor, slice, args, unit, head);
  else
    emitFullPrecisionFlush(kb, layout, tensor, slice, args, unit, head);
}
