//===- KeyNormKernel.cpp - InnerQ per-channel key norms -------------------===//
//
// n_c = sqrt(max_t |K_t,c|) over the prompt, or 1 where that max is 0
// (docs/Numerics.md), in two launches of one kernel: phase 0, block k, takes
// the maxima of chunk k of the prompt's tokens for every channel of every
// kv-head (all of a token's row: one stream through memory, as many blocks
// as chunks); phase 1, block h, combines kv-head h's chunk maxima into its
// norms. Max and sqrt are exact, so the norms are those of one pass in any
// order.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"

using namespace mlir;
using namespace kvq;

namespace {
/// The arguments of kvq/ABI/KernelABI.h.
struct KeyNormArgs {
  using A = abi::KeyNormArgs;
  Value src, norms, partials, numTokens, numChunks, phase;
  explicit KeyNormArgs(const KernelEntry &e)
      : src(e.args[A::Src]), norms(e.args[A::Norms]),
        partials(e.args[A::Partials]), numTokens(e.args[A::NumTokens]),
        numChunks(e.args[A::NumChunks]), phase(e.args[A::Phase]) {}
};

/// Emits the key-norm kernel: a row is the Hkv * D channels of one token
/// (src) or of one chunk's maxima (partials).
class KeyNormEmitter {
public:
  KeyNormEmitter(KernelBuilder &kb, const KernelEntry &entry, ModelAttr model)
      : kb(kb), args(entry), block(entry.blockId[0]), model(model),
        rowChannels(model.getKvHeads() * model.getHeadDim()),
        lanes(getAppendLanes(kb.getTarget(), model.getHeadDim())) {}

  void emit();

private:
  /// Phase 0: partials[block] = max |src[t]| over the block's chunk.
  void emitChunkMaxima();
  /// Phase 1: norms of kv-head `block` from every chunk's maxima.
  void emitNorms();

  /// Elements [index, index + lanes) of `ptr` as f32 (a vector; a scalar
  /// for one lane); `invariant` where nothing writes them during the launch.
  Value loadChannels(Type type, Value ptr, Value index, bool invariant);
  /// Stores f32 elements at `index` of `ptr`.
  void storeChannels(Value value, Value ptr, Value index);

  KernelBuilder &kb;
  KeyNormArgs args;
  Value block;
  ModelAttr model;
  unsigned rowChannels, lanes;
};
} // namespace

/// n = sqrt(max |K|), or 1 where the max is 0 (scalars or vectors).
static Value normOf(KernelBuilder &kb, Value maxAbs) {
  return kb.select(kb.feq(maxAbs, kb.f32Like(maxAbs, 0)), kb.f32Like(maxAbs, 1),
                   kb.sqrt(maxAbs));
}

/// max(|x|, acc) compared as bits: a non-negative float's bits order as its
/// value, and a NaN's lie above infinity's, so a NaN key stays in its
/// chunk's maxima where a float max would skip it. Phase 0's maxima are
/// then non-finite exactly where a key is, which the runtime reads instead
/// of scanning the keys itself (docs/Reliability.md); finite and infinite
/// maxima are the float max's. One integer max (vpmaxsd, max.s32).
static Value maxMagnitude(KernelBuilder &kb, Value acc, Value x) {
  Type i32 = kb.builder().getI32Type(), f32 = kb.builder().getF32Type();
  return kb.bitcast(f32,
                    kb.maxS(kb.bitcast(i32, kb.fabs(x)), kb.bitcast(i32, acc)));
}

Value KeyNormEmitter::loadChannels(Type type, Value ptr, Value index,
                                   bool invariant) {
  if (lanes > 1)
    return kb.loadFloatVector(type, ptr, index, lanes, invariant);
  return kb.loadFloat(type, ptr, index, invariant);
}

void KeyNormEmitter::storeChannels(Value value, Value ptr, Value index) {
  kb.store(value, ptr, kb.mul(kb.toI64(index), kb.i64(4)), 4);
}

void KeyNormEmitter::emitChunkMaxima() {
  // ceil(n / numChunks) tokens a chunk; the last ones may be short or empty
  // (maxima 0, which phase 1 ignores: |K| >= 0).
  Value one = kb.i32(1);
  Value per = kb.divU(kb.add(args.numTokens, kb.sub(args.numChunks, one)),
                      args.numChunks);
  Value first = kb.minU(kb.mul(block, per), args.numTokens);
  Value last = kb.minU(kb.add(first, per), args.numTokens);
  Value out = kb.mul(block, kb.i32(rowChannels));
  Type dtype = model.getDtype(), f32 = kb.builder().getF32Type();
  if (lanes == 1) {
    // A thread per channel; a warp's loads of one token are adjacent.
    kb.getTarget().parallelFor(kb, kb.i32(rowChannels), [&](Value c) {
      Value maxAbs = kb.forLoop(
          first, last, one, {kb.f32(0)},
          [&](Value t, ValueRange acc) -> SmallVector<Value> {
            Value x = loadChannels(dtype, args.src,
                                   kb.add(kb.mul(t, kb.i32(rowChannels)), c),
                                   /*invariant=*/true);
            return {maxMagnitude(kb, acc[0], x)};
          })[0];
      storeChannels(maxAbs, args.partials, kb.add(out, c));
    });
    return;
  }
  // The CPU: whole rows in token order (one stream), the maxima kept in the
  // block's row of partials (a row is more vectors than registers).
  Value vectors = kb.i32(rowChannels / lanes);
  Value zeros = kb.splat(kb.f32(0), lanes);
  auto channelOf = [&](Value v) { return kb.mul(v, kb.i32(lanes)); };
  kb.forEach(kb.i32(0), vectors, [&](Value v) {
    storeChannels(zeros, args.partials, kb.add(out, channelOf(v)));
  });
  kb.forEach(first, last, [&](Value t) {
    Value row = kb.mul(t, kb.i32(rowChannels));
    kb.forEach(kb.i32(0), vectors, [&](Value v) {
      Value c = channelOf(v);
      Value x = loadChannels(dtype, args.src, kb.add(row, c),
                             /*invariant=*/true);
      Value acc = loadChannels(f32, args.partials, kb.add(out, c),
                               /*invariant=*/false);
      storeChannels(maxMagnitude(kb, acc, x), args.partials, kb.add(out, c));
    });
  });
}

void KeyNormEmitter::emitNorms() {
  unsigned dim = model.getHeadDim();
  Type f32 = kb.builder().getF32Type();
  Value headChannel = kb.mul(block, kb.i32(dim));
  // Channels [c, c + lanes) of kv-head `block`: the largest of their chunk
  // maxima, as norms. A NaN maximum (a NaN in device keys, which nothing
  // scans) is skipped, as the float max skips a NaN key.
  auto normsAt = [&](Value c) {
    Value channel = kb.add(headChannel, c);
    Value zero = lanes > 1 ? kb.splat(kb.f32(0), lanes) : kb.f32(0);
    Value maxAbs =
        kb.forLoop(kb.i32(0), args.numChunks, kb.i32(1), {zero},
                   [&](Value k, ValueRange acc) -> SmallVector<Value> {
                     Value m = loadChannels(
                         f32, args.partials,
                         kb.add(kb.mul(k, kb.i32(rowChannels)), channel),
                         /*invariant=*/false);
                     return {kb.runningMax(acc[0], m)};
                   })[0];
    storeChannels(normOf(kb, maxAbs), args.norms, channel);
  };
  if (lanes == 1)
    return kb.getTarget().parallelFor(kb, kb.i32(dim), normsAt);
  for (unsigned c = 0; c < dim; c += lanes)
    normsAt(kb.i32(c));
}

void KeyNormEmitter::emit() {
  kb.ifThenElse(
      kb.eq(args.phase, kb.i32(0)), {},
      [&] {
        emitChunkMaxima();
        return SmallVector<Value>();
      },
      [&] {
        emitNorms();
        return SmallVector<Value>();
      });
}

void kvq::emitKeyNormKernel(KernelBuilder &kb, const KernelEntry &entry,
                            const CacheLayout &layout) {
  KeyNormEmitter(kb, entry, layout.model).emit();
}
