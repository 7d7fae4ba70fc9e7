//===- FlushProgram.cpp - the flush kernel as a program -------------------===//
//
// Block (u, h) moves flush unit u of kv-head h into the pages, for a
// full-precision slice (a copy) or a span = tokens slice (quantized per
// channel over blocks of `group` tokens). The tokens are read where they
// are (FlushSource); each channel's group is quantized by one iteration of
// a parallel loop over the row's channels, in index order, by the same
// Quantizer arithmetic as the reference: kvq-vectorize-parallel makes the
// channels the host's lanes (a lane per group), kvq-distribute-parallel a
// thread per group on the GPU. The other slices' flush is still emitted by
// FlushKernel.cpp's forms.
//
// The kernel is a program for both targets (ProgramBuilder.h); a page's
// regions are typed views of its bytes (`memref.view`).
//
//===----------------------------------------------------------------------===//

#include "ChannelTables.h"
#include "CodePacking.h"
#include "ProgramBuilder.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <numeric>

using namespace mlir;
using namespace kvq;

bool kvq::isFlushProgram(const CacheLayout &layout, ArrayRef<int64_t> layers,
                         bool isKeys) {
  const SliceLayout &slice = layout.get(isKeys).layers[layers.front()];
  if (!slice.isQuantized())
    return true;
  return slice.quant.getSpan() == Span::Tokens && !slice.quant.isRotated() &&
         !hasChannelTables(slice);
}

namespace {

class FlushProgram {
public:
  FlushProgram(OpBuilder &b, Location loc, const CacheLayout &layout,
               const KernelSpec &spec)
      : pb(b, loc), layout(layout), model(layout.model),
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
  /// Flushed token `token`'s row of `dim` elements (model dtype).
  Value tokenRow(Value token);
  /// The byte offset of the slice holding quantized position `qpos`.
  Value sliceAt(Value qpos);
  /// Sets the NonFinite flag where `x` (f32) is not finite: the runtime
  /// then rejects the append and undoes the flush (docs/Reliability.md).
  void flagNonFinite(Value x);

  void buildFullPrecision();
  void buildTokenGroups();
  /// Quantizes channel `c`'s group of a block of tokens, token k's row
  /// `rowOf(k)`, into the block's rows of `codes` (null: the layer shares
  /// another's), `scales` and `zeros` (null: sym). `unrolled`: the codes
  /// are computed and packed all at once (one store of the group's words),
  /// else a chunk that fills whole words at a time (fewer rows live: a
  /// GPU thread that looks each row up keeps only a chunk's addresses).
  void quantizeChannel(Value c, function_ref<Value(Value)> rowOf, bool unrolled,
                       Value norms, Value codes, Value scales, Value zeros);

  ProgramBuilder pb;
  const CacheLayout &layout;
  ModelAttr model;
  const TensorLayout &tensor;
  const SliceLayout &slice;
  unsigned flush, dim;
  func::FuncOp func;
  Value unit, head;
  FlushSource source;
};

} // namespace

void FlushProgram::forEachToken(unsigned count,
                                function_ref<void(Value)> body) {
  if (count == 1)
    return body(pb.i32(0));
  pb.parallelFor(count, [&](Value t) { body(pb.indexToI32(t)); });
}

Value FlushProgram::tokenRow(Value token) {
  auto [buffer, row] = source.row(pb, model, token, head);
  return pb.row(buffer, row, dim);
}

Value FlushProgram::sliceAt(Value qpos) {
  Value page =
      pb.loadElement(arg(A::Table), pb.divU(qpos, pb.i32(layout.pageTokens)));
  return sliceByteOffset(pb, tensor, slice, page, head);
}

void FlushProgram::flagNonFinite(Value x) {
  pb.ifThen(pb.isNonFinite(x),
            [&] { pb.storeElement(pb.i32(1), arg(A::NonFinite), pb.i32(0)); });
}

/// Token by token, a row of the slice's page is the token's row as
/// appended.
void FlushProgram::buildFullPrecision() {
  Type dtype = model.getDtype();
  forEachToken(flush, [&](Value t) {
    Value token = pb.add(pb.mul(unit, pb.i32(flush)), t);
    Value src = tokenRow(token);
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

/// Block by block of `group` tokens, channel c's group is quantized by
/// iteration c: its parameters from one pass over the tokens (which checks
/// them), its codes from a second, packed into its words.
void FlushProgram::buildTokenGroups() {
  unsigned group = slice.quant.getGroup(), words = slice.WordsPerGroup;
  Type bitsType = Quantizer(pb, slice.quant).getParamBitsType();
  Type i32 = pb.builder().getI32Type();
  forEachToken(flush / group, [&](Value block) {
    Value token =
        pb.add(pb.mul(unit, pb.i32(flush)), pb.mul(block, pb.i32(group)));
    Value qpos = pb.add(arg(A::DestPos), token);
    Value base = sliceAt(qpos);
    // The block's groups in the page: a row of `dim` from group n0.
    Value n0 =
        pb.mul(pb.divU(pb.remU(qpos, pb.i32(layout.pageTokens)), pb.i32(group)),
               pb.i32(dim));
    auto paramRow = [&](uint64_t offset) {
      Value params = pb.view(arg(A::Pages), pb.add(base, pb.i64(offset)),
                             bitsType, slice.GroupsPerPage);
      return pb.row(params, n0, dim);
    };
    Value scales = paramRow(slice.ScalesOffset);
    Value zeros = slice.hasZeros() ? paramRow(slice.ZerosOffset) : Value();
    Value codes;
    if (!slice.sharesCodes())
      codes = pb.row(pb.view(arg(A::Pages), base, i32, slice.CodesBytes / 4),
                     pb.mul(n0, pb.i32(words)), int64_t(dim) * words);
    Value norms;
    if (slice.quant.getKeyNorm())
      norms = pb.row(arg(A::Norms), pb.mul(head, pb.i32(dim)), dim);
    // The channels' groups, token k's row of the block given by `rowOf`.
    auto quantizeChannels = [&](function_ref<Value(Value)> rowOf,
                                bool unrolled) {
      pb.parallelFor(dim, [&](Value c) {
        quantizeChannel(c, rowOf, unrolled, norms, codes, scales, zeros);
      });
      return SmallVector<Value>();
    };
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
                                   bool unrolled, Value norms, Value codes,
                                   Value scales, Value zeros) {
  QuantAttr quant = slice.quant;
  unsigned group = quant.getGroup(), words = slice.WordsPerGroup;
  Quantizer quantizer(pb, quant);
  auto load = [&](Value k, bool check) {
    Value x = pb.loadElementAsF32(rowOf(k), c);
    if (check)
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
  pb.storeElement(quantizer.paramBits(params.scale), scales, c);
  if (zeros)
    pb.storeElement(quantizer.paramBits(params.zero), zeros, c);
  // Saturated parameters are finite but not accurate: count the group.
  pb.ifThen(params.saturated,
            [&] { pb.atomicAdd(pb.i32(1), arg(A::Saturated), pb.i32(0)); });
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
  source = {arg(A::Window), arg(A::Input), arg(A::WindowHead),
            arg(A::WindowTokens), tensor.windowCapacity};
  // A block past the flush's units (the GPU entry runs several a block:
  // kvq.unit_tasks) moves nothing.
  Value units = pb.divU(arg(A::NumTokens), pb.i32(flush));
  pb.ifThen(pb.ult(unit, units), [&] {
    if (slice.isQuantized())
      buildTokenGroups();
    else
      buildFullPrecision();
  });
  unsigned tasks =
      slice.isQuantized() ? flush / slice.quant.getGroup() * dim : flush * dim;
  func->setAttr("kvq.unit_tasks", b.getI64IntegerAttr(tasks));
  func::ReturnOp::create(b, pb.getLoc());
}

void kvq::buildFlushProgram(OpBuilder &b, Location loc, const KernelSpec &spec,
                            const CacheLayout &layout) {
  FlushProgram(b, loc, layout, spec).build(spec.name);
}
