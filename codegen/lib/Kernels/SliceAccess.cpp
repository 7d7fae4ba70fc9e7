//===- SliceAccess.cpp - addressing pages, slices and codes ---------------===//

#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvq;

SliceAccess::SliceAccess(KernelBuilder &kb, const TensorLayout &tensor,
                         const SliceLayout &slice, unsigned pageTokens,
                         Value pages, Value table, Value qpos, Value head)
    : kb(kb), slice(slice) {
  Value page = kb.loadU32(table, kb.divU(qpos, kb.i32(pageTokens)),
                          /*invariant=*/true);
  base = kb.gep(pages, sliceByteOffset(kb, tensor, slice, page, head));
  codesBase = base;
  if (slice.sharesCodes())
    codesBase = kb.gep(
        base, kb.add(kb.i64(slice.CodesLayerDelta),
                     kb.mul(kb.toI64(head), kb.i64(slice.CodesHeadDelta))));
}

Value kvq::sliceByteOffset(KernelBuilder &kb, const TensorLayout &tensor,
                           const SliceLayout &slice, Value page, Value head) {
  return kb.add(kb.mul(kb.toI64(page), kb.i64(tensor.pageBytes)),
                kb.mul(kb.toI64(head), kb.i64(slice.SliceBytes)));
}

Value SliceAccess::loadWord(Value index) {
  return kb.load(kb.builder().getI32Type(), codesBase,
                 kb.mul(kb.toI64(index), kb.i64(4)), 4, /*invariant=*/true);
}

Value SliceAccess::loadCode(Value n, Value k) {
  return loadCodeAt(kb.mul(n, kb.i32(slice.WordsPerGroup)), k);
}

Value SliceAccess::loadCodeAt(Value firstWord, Value k) {
  return kvq::loadCodeAt(kb, slice.quant.getBits(), firstWord, k,
                         [&](Value index) { return loadWord(index); });
}

Value SliceAccess::loadGroupWord(Value n, unsigned w) {
  return loadWord(kb.add(kb.mul(n, kb.i32(slice.WordsPerGroup)), kb.i32(w)));
}

void SliceAccess::storeWord(Value n, Value w, Value word) {
  storeCodeWord(kb.add(kb.mul(n, kb.i32(slice.WordsPerGroup)), w), word);
}

void SliceAccess::storeCodeWord(Value index, Value word) {
  assert(!slice.sharesCodes() && "a sharing layer stores no codes");
  kb.store(word, base, kb.mul(kb.toI64(index), kb.i64(4)), 4);
}

Value SliceAccess::paramOffset(uint64_t arrayOffset, Value n) {
  return kb.add(kb.i64(arrayOffset),
                kb.mul(kb.toI64(n), kb.i64(slice.ParamBytes)));
}

Value SliceAccess::loadScaleBits(Quantizer &quantizer, Value n,
                                 unsigned after) {
  uint64_t offset = slice.ScalesOffset + uint64_t(after) * slice.ParamBytes;
  return kb.load(quantizer.getParamBitsType(), base, paramOffset(offset, n),
                 slice.ParamBytes, /*invariant=*/true);
}

Value SliceAccess::loadZeroBits(Quantizer &quantizer, Value n, unsigned after) {
  if (slice.ZerosOffset < 0)
    return {};
  uint64_t offset = slice.ZerosOffset + uint64_t(after) * slice.ParamBytes;
  return kb.load(quantizer.getParamBitsType(), base, paramOffset(offset, n),
                 slice.ParamBytes, /*invariant=*/true);
}

Value SliceAccess::loadScale(Quantizer &quantizer, Value n, unsigned after) {
  return quantizer.paramFromBits(loadScaleBits(quantizer, n, after));
}

Value SliceAccess::loadZero(Quantizer &quantizer, Value n, unsigned after) {
  Value bits = loadZeroBits(quantizer, n, after);
  return bits ? quantizer.paramFromBits(bits) : kb.f32(0);
}

Value SliceAccess::loadParams(Quantizer &quantizer, uint64_t arrayOffset,
                              Value n, unsigned count, bool alignedN) {
  OpBuilder &b = kb.builder();
  Type type = slice.quant.getParams();
  auto f32s = VectorType::get({count}, b.getF32Type());
  if (isa<Float16Type, BFloat16Type, Float32Type>(type)) {
    // Parameter arrays start on kLayoutAlignment bytes.
    uint64_t bytes = uint64_t(count) * slice.ParamBytes;
    unsigned align = alignedN && llvm::isPowerOf2_64(bytes)
                         ? unsigned(std::min(bytes, kLayoutAlignment))
                         : slice.ParamBytes;
    Value params = kb.load(VectorType::get({count}, type), base,
                           paramOffset(arrayOffset, n), align,
                           /*invariant=*/true);
    if (type.isF32())
      return params;
    return arith::ExtFOp::create(b, kb.getLoc(), f32s, params);
  }
  // Other dtypes decode through the quantizer, one group at a time.
  SmallVector<Value> params;
  for (unsigned i = 0; i < count; ++i)
    params.push_back(quantizer.paramFromBits(kb.load(
        quantizer.getParamBitsType(), base,
        paramOffset(arrayOffset, kb.add(n, kb.i32(i))), slice.ParamBytes,
        /*invariant=*/true)));
  return vector::FromElementsOp::create(b, kb.getLoc(), f32s, params);
}

Value SliceAccess::loadScales(Quantizer &quantizer, Value n, unsigned count,
                              bool alignedN) {
  return loadParams(quantizer, slice.ScalesOffset, n, count, alignedN);
}

Value SliceAccess::loadZeros(Quantizer &quantizer, Value n, unsigned count,
                             bool alignedN) {
  if (slice.ZerosOffset < 0)
    return kb.splat(kb.f32(0), count);
  return loadParams(quantizer, slice.ZerosOffset, n, count, alignedN);
}

void SliceAccess::prefetchParams(Value n, unsigned count) {
  unsigned lines = llvm::divideCeil(uint64_t(count) * slice.ParamBytes, 64);
  KernelTarget &target = kb.getTarget();
  target.prefetch(kb, base, paramOffset(slice.ScalesOffset, n), lines);
  if (slice.ZerosOffset >= 0)
    target.prefetch(kb, base, paramOffset(slice.ZerosOffset, n), lines);
}

void SliceAccess::storeScale(Value n, Value bits) {
  kb.store(bits, base, paramOffset(slice.ScalesOffset, n), slice.ParamBytes);
}

void SliceAccess::storeZero(Value n, Value bits) {
  if (slice.ZerosOffset >= 0)
    kb.store(bits, base, paramOffset(slice.ZerosOffset, n), slice.ParamBytes);
}

Value kvq::loadCodeAt(KernelBuilder &kb, unsigned bits, Value firstWord,
                      Value k, function_ref<Value(Value)> loadWord) {
  Value bit = kb.mul(k, kb.i32(bits));
  Value word = kb.add(firstWord, kb.divU(bit, kb.i32(32)));
  // A code in one word is shifted as one (vectorized, 32-bit lanes).
  if (32 % bits == 0) {
    Value shift = kb.remU(bit, kb.i32(32));
    return kb.bitAnd(kb.shrU(loadWord(word), shift),
                     kb.i32((1u << bits) - 1));
  }
  Value shift = kb.toI64(kb.remU(bit, kb.i32(32)));
  Value code = kb.toI64(loadWord(word));
  // A code may straddle two words. Read the next one too, branch-free so
  // that CPU loops vectorize: it exists, since the parameters follow the
  // codes in every slice.
  Value next = kb.toI64(loadWord(kb.add(word, kb.i32(1))));
  code = kb.bitOr(code, kb.shl(next, kb.i64(32)));
  return kb.bitAnd(kb.toI32(kb.shrU(code, shift)), kb.i32((1u << bits) - 1));
}

Value kvq::extractCode(KernelBuilder &kb, ArrayRef<Value> words, unsigned bit,
                       unsigned bits) {
  unsigned word = bit / 32, shift = bit % 32;
  Value code = kb.shrU(words[word], kb.i32(shift));
  if (shift + bits > 32)
    code = kb.bitOr(code, kb.shl(words[word + 1], kb.i32(32 - shift)));
  return kb.bitAnd(code, kb.i32((1u << bits) - 1));
}

Value kvq::fullPrecisionRow(KernelBuilder &kb, ModelAttr model,
                            unsigned capacity, Value slot, Value token,
                            Value head) {
  Value row = kb.add(kb.mul(slot, kb.i32(capacity)), token);
  Value slice = kb.add(kb.mul(row, kb.i32(model.getKvHeads())), head);
  return kb.mul(slice, kb.i32(model.getHeadDim()));
}

Value kvq::windowRow(KernelBuilder &kb, unsigned capacity, Value head,
                     Value w) {
  // head + w < 2 * capacity: one conditional subtraction, no division.
  Value row = kb.add(head, w);
  return kb.select(kb.ult(row, kb.i32(capacity)), row,
                   kb.sub(row, kb.i32(capacity)));
}

Value kvq::windowElement(KernelBuilder &kb, ModelAttr model, unsigned capacity,
                         Value slot, Value ringHead, Value w, Value head) {
  return fullPrecisionRow(kb, model, capacity, slot,
                          windowRow(kb, capacity, ringHead, w), head);
}

std::pair<Value, Value> FlushSource::row(KernelBuilder &kb, ModelAttr model,
                                         Value token, Value head) const {
  Value inRing = kb.ult(token, ringTokens);
  // Tokens past the ring's give a ring row that is never used.
  Value r = kb.select(inRing, windowRow(kb, capacity, ringHead, token),
                      kb.sub(token, ringTokens));
  return {kb.select(inRing, ring, input),
          fullPrecisionRow(kb, model, /*capacity=*/0, kb.i32(0), r, head)};
}

Value FlushSource::isContiguous(KernelBuilder &kb, Value token,
                                unsigned count) const {
  Value last = kb.add(token, kb.i32(count - 1));
  Value inInput = kb.eq(kb.ult(token, ringTokens), kb.i1(false));
  Value lastRow =
      kb.add(windowRow(kb, capacity, ringHead, token), kb.i32(count - 1));
  Value inRing =
      kb.bitAnd(kb.ult(last, ringTokens), kb.ult(lastRow, kb.i32(capacity)));
  return kb.bitOr(inInput, inRing);
}
