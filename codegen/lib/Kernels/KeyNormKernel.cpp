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
// The kernel is a program for both targets (the kernel program of
// docs/Rationale.md, "Pipeline stages"): buffers are memrefs viewed a row at
// a time, the block is `gpu.block_id`, and the work the block's threads
// share is `scf.parallel` over a row's channels. kvq-vectorize-parallel
// makes those loops vectors on the CPU, kvq-distribute-parallel spreads
// them over a GPU block's threads.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/ProgramBuilder.h"

#include "kvq/Codegen/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace kvq;

namespace {

/// Builds the key-norm program: a row is the Hkv * D channels of one token
/// (src) or of one chunk's maxima (partials).
class KeyNormProgram {
public:
  KeyNormProgram(OpBuilder &b, Location loc, ModelAttr model)
      : b(b), loc(loc), pb(b, loc), model(model),
        rowChannels(model.getKvHeads() * model.getHeadDim()) {}

  void build(StringRef name);

private:
  /// Phase 0: partials[block] = max |src[t]| over the block's chunk.
  void buildChunkMaxima(Value src, Value partials, Value numTokens,
                        Value numChunks);
  /// Phase 1: norms of kv-head `block` from every chunk's maxima.
  void buildNorms(Value norms, Value partials, Value numChunks);

  Value index(int64_t value) { return pb.index(value); }
  Value toIndex(Value i32) { return pb.toIndex(i32); }

  OpBuilder &b;
  Location loc;
  ProgramBuilder pb;
  ModelAttr model;
  int64_t rowChannels;
  Value block;
};

} // namespace

/// n = sqrt(max |K|), or 1 where the max is 0.
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

void KeyNormProgram::buildChunkMaxima(Value src, Value partials,
                                      Value numTokens, Value numChunks) {
  // ceil(n / numChunks) tokens a chunk; the last ones may be short or empty
  // (maxima 0, which phase 1 ignores: |K| >= 0).
  Value n = toIndex(numTokens), chunks = toIndex(numChunks);
  Value per = arith::DivUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, n,
                            arith::SubIOp::create(b, loc, chunks, index(1))),
      chunks);
  Value first = arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, block, per), n);
  Value last = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, first, per), n);
  Value maxima =
      pb.row(partials, arith::MulIOp::create(b, loc, block, index(rowChannels)),
             rowChannels);
  Value zero = pb.f32(0);
  pb.parallelFor(rowChannels,
                 [&](Value c) { pb.storeElement(zero, maxima, c); });
  // Token by token: one stream through the keys, the maxima updated in
  // place.
  scf::ForOp::create(
      b, loc, first, last, index(1), ValueRange{},
      [&](OpBuilder &, Location, Value t, ValueRange) {
        Value keys =
            pb.row(src, arith::MulIOp::create(b, loc, t, index(rowChannels)),
                   rowChannels);
        pb.parallelFor(rowChannels, [&](Value c) {
          Value x = pb.loadElementAsF32(keys, c);
          Value acc = pb.loadElement(maxima, c);
          pb.storeElement(maxMagnitude(pb, acc, x), maxima, c);
        });
        scf::YieldOp::create(b, loc);
      });
}

void KeyNormProgram::buildNorms(Value norms, Value partials, Value numChunks) {
  int64_t dim = model.getHeadDim();
  Value headChannel = arith::MulIOp::create(b, loc, block, index(dim));
  Value headNorms = pb.row(norms, headChannel, dim);
  // Channel c of kv-head `block`: the largest of its chunk maxima, as a
  // norm. A NaN maximum (a NaN in device keys, which nothing scans) is
  // skipped, as the float max skips a NaN key.
  pb.parallelFor(dim, [&](Value c) {
    auto loop = scf::ForOp::create(
        b, loc, index(0), toIndex(numChunks), index(1), ValueRange{pb.f32(0)},
        [&](OpBuilder &, Location, Value k, ValueRange acc) {
          Value maxima = pb.row(
              partials,
              arith::AddIOp::create(
                  b, loc, arith::MulIOp::create(b, loc, k, index(rowChannels)),
                  headChannel),
              dim);
          Value m = pb.loadElement(maxima, c);
          scf::YieldOp::create(b, loc, pb.selectMax(m, acc[0]));
        });
    pb.storeElement(normOf(pb, loop.getResult(0)), headNorms, c);
  });
}

void KeyNormProgram::build(StringRef name) {
  using A = abi::KeyNormArgs;
  SmallVector<Type> args(A::NumArgs, b.getI32Type());
  args[A::Src] = ProgramBuilder::getBufferType(model.getDtype());
  args[A::Norms] = ProgramBuilder::getBufferType(b.getF32Type());
  args[A::Partials] = ProgramBuilder::getBufferType(b.getF32Type());
  OpBuilder::InsertionGuard guard(b);
  func::FuncOp func = pb.createProgram(name, args);
  auto arg = [&](unsigned id) { return func.getArgument(id); };
  block = pb.toIndex(pb.getBlockId());
  pb.ifThenElse(
      pb.eq(arg(A::Phase), pb.i32(0)), {},
      [&] {
        buildChunkMaxima(arg(A::Src), arg(A::Partials), arg(A::NumTokens),
                         arg(A::NumChunks));
        return SmallVector<Value>();
      },
      [&] {
        buildNorms(arg(A::Norms), arg(A::Partials), arg(A::NumChunks));
        return SmallVector<Value>();
      });
  func::ReturnOp::create(b, loc);
}

void kvq::buildKeyNormProgram(OpBuilder &b, Location loc,
                              const KernelSpec &spec,
                              const CacheLayout &layout) {
  KeyNormProgram(b, loc, layout.model).build(spec.name);
}
