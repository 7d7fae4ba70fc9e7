//===- Rotation.cpp - Hadamard rotation of the kernels --------------------===//
//
// The butterflies of a stage are independent, so a stage is one parallelFor
// over every row's D/2 butterflies and its barrier orders it before the
// next: n log n adds per row on both targets, with the fp32 roundings of
// the reference (no reassociation, no FMA).
//
//===----------------------------------------------------------------------===//

#include "Rotation.h"

#include "kvq/Support/Hadamard.h"
#include "llvm/Support/MathExtras.h"

#include <string>

using namespace mlir;
using namespace kvq;

/// The sign bit (0 or 0x80000000) each channel's f32 is XORed with, as a
/// constant table of the kernel; null without a seed (every sign +1).
static Value getSignTable(KernelBuilder &kb, QuantAttr quant, unsigned dim) {
  std::optional<unsigned> seed = quant.getRotateSeed();
  if (!seed)
    return Value();
  std::vector<bool> negated = hadamard::negatedChannels(*seed, dim);
  SmallVector<int32_t> masks;
  for (bool n : negated)
    masks.push_back(n ? INT32_MIN : 0);
  return kb.getTarget().getConstantTable(
      kb, "hadamard_signs_" + std::to_string(*seed) + "_" + std::to_string(dim),
      masks);
}

void kvq::rotateRows(KernelBuilder &kb, QuantAttr quant, unsigned dim,
                     unsigned rows, RotationDirection direction, Value to,
                     function_ref<Value(Value, Value)> load) {
  assert(llvm::isPowerOf2_32(dim) && "the verifier requires it");
  bool reassociate = kb.getReassociate();
  kb.setReassociate(false);
  Value signs = getSignTable(kb, quant, dim);
  Value scale = kb.f32(hadamard::scale(dim));
  bool forward = direction == RotationDirection::Forward;
  auto sign = [&](Value x, Value c) {
    if (!signs)
      return x;
    Type i32 = kb.builder().getI32Type();
    Value bits = kb.bitcast(i32, x);
    Value flipped = arith::XOrIOp::create(kb.builder(), kb.getLoc(), bits,
                                          kb.loadU32(signs, c));
    return kb.bitcast(kb.builder().getF32Type(), flipped);
  };
  // First stage: `load`, then the forward signs; last: the scale, then the
  // inverse signs.
  auto read = [&](bool first, Value row, Value c) {
    if (!first)
      return kb.loadF32(to, kb.add(kb.mul(row, kb.i32(dim)), c));
    Value x = load(row, c);
    return forward ? sign(x, c) : x;
  };
  auto write = [&](bool last, Value x, Value row, Value c) {
    if (last) {
      x = kb.fmul(x, scale);
      if (!forward)
        x = sign(x, c);
    }
    kb.storeF32(x, to, kb.add(kb.mul(row, kb.i32(dim)), c));
  };
  KernelTarget &target = kb.getTarget();
  if (dim == 1) {
    target.parallelFor(kb, kb.i32(rows), [&](Value row) {
      write(true, read(true, row, kb.i32(0)), row, kb.i32(0));
    });
    kb.setReassociate(reassociate);
    return;
  }
  unsigned half = dim / 2;
  for (unsigned h = 1; h < dim; h *= 2) {
    bool first = h == 1, last = h == half;
    target.parallelFor(kb, kb.i32(rows * half), [&](Value i) {
      // Butterfly b of the row pairs j (bit h clear) with j + h.
      Value row = kb.divU(i, kb.i32(half)), b = kb.remU(i, kb.i32(half));
      Value j = kb.add(kb.mul(kb.divU(b, kb.i32(h)), kb.i32(2 * h)),
                       kb.remU(b, kb.i32(h)));
      Value jh = kb.add(j, kb.i32(h));
      Value x = read(first, row, j), y = read(first, row, jh);
      write(last, kb.fadd(x, y), row, j);
      write(last, kb.fsub(x, y), row, jh);
    });
  }
  kb.setReassociate(reassociate);
}
