//===- Rotation.cpp - Hadamard rotation of the kernels --------------------===//
//
// The butterflies of a stage are independent: a block of threads runs a
// stage as one parallelFor over every row's D/2 butterflies, whose barrier
// orders it before the next; a block of one thread keeps a row in vector
// registers through every stage. Either way n log n adds per row, with the
// fp32 roundings of the reference (no reassociation, no FMA).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Rotation.h"

#include "kvq/Support/Hadamard.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kvq;

/// The sign bit (0 or 0x80000000) each channel's f32 is XORed with; empty
/// without a seed (every sign +1).
static SmallVector<int32_t> getSignMasks(std::optional<unsigned> seed,
                                         unsigned dim) {
  if (!seed)
    return {};
  SmallVector<int32_t> masks;
  for (bool negated : hadamard::negatedChannels(*seed, dim))
    masks.push_back(negated ? INT32_MIN : 0);
  return masks;
}

/// The sign mask of channel `c` (i32) computed, not looked up: bit c % 32
/// of the masks' 32-bit chunk c / 32, the chunk chosen by c's higher bits
/// (dim is a power of two, so the chunks pair up), moved to the sign bit.
static Value getSignMask(KernelBuilder &kb, ArrayRef<int32_t> masks, Value c) {
  SmallVector<Value> chunks;
  for (size_t first = 0; first < masks.size(); first += 32) {
    uint32_t chunk = 0;
    for (size_t k = 0; k < 32 && first + k < masks.size(); ++k)
      if (masks[first + k])
        chunk |= 1u << k;
    chunks.push_back(kb.i32(int32_t(chunk)));
  }
  for (unsigned bit = 32; chunks.size() > 1; bit *= 2) {
    Value high = kb.ult(kb.i32(0), kb.bitAnd(c, kb.i32(bit)));
    SmallVector<Value> next;
    for (size_t i = 0; i < chunks.size(); i += 2)
      next.push_back(kb.select(high, chunks[i + 1], chunks[i]));
    chunks = std::move(next);
  }
  Value shift = kb.sub(kb.i32(31), kb.bitAnd(c, kb.i32(31)));
  return kb.bitAnd(kb.shl(chunks.front(), shift), kb.i32(INT32_MIN));
}

/// `x` (f32, or a vector of f32) with its sign bits XORed with `masks` (i32
/// of the same shape).
static Value flipSigns(KernelBuilder &kb, Value x, Value masks) {
  Type i32 = kb.builder().getI32Type(), f32 = kb.builder().getF32Type();
  Value bits = arith::XOrIOp::create(kb.builder(), kb.getLoc(),
                                     kb.bitcast(i32, x), masks);
  return kb.bitcast(f32, bits);
}

/// One thread's form (blocks of one thread with vector lanes, the CPU): a
/// row at a time, its channels as vectors of `lanes` in registers. Stages
/// h >= lanes pair whole vectors; a stage h < lanes pairs lane l with lane
/// l ^ h of one vector, taking x + partner where bit h of l is clear and
/// partner - x where it is set: the same a + b and a - b.
static void rotateRowsInLanes(KernelBuilder &kb, unsigned dim, unsigned rows,
                              unsigned lanes, bool forward,
                              ArrayRef<int32_t> masks,
                              const RotationMemory &memory) {
  OpBuilder &b = kb.builder();
  unsigned vectors = dim / lanes;
  auto signs = [&](Value x, unsigned k) {
    if (masks.empty())
      return x;
    return flipSigns(kb, x, kb.vectorI32(masks.slice(k * lanes, lanes)));
  };
  memory.parallelFor(rows, [&](Value row) {
    Value first = kb.mul(row, kb.i32(dim));
    SmallVector<Value> v;
    for (unsigned k = 0; k < vectors; ++k) {
      Value x = memory.load(row, kb.i32(k * lanes), lanes);
      v.push_back(forward ? signs(x, k) : x);
    }
    for (unsigned h = 1; h < dim; h *= 2) {
      if (h >= lanes) {
        unsigned m = h / lanes;
        for (unsigned k = 0; k < vectors; ++k)
          if (!(k & m))
            std::tie(v[k], v[k + m]) = std::make_pair(kb.fadd(v[k], v[k + m]),
                                                      kb.fsub(v[k], v[k + m]));
        continue;
      }
      SmallVector<int64_t> partner, pick;
      for (unsigned l = 0; l < lanes; ++l) {
        partner.push_back(l ^ h);
        pick.push_back(l & h ? lanes + l : l);
      }
      for (Value &x : v) {
        Value other = kb.shuffle(x, partner);
        x = vector::ShuffleOp::create(b, kb.getLoc(), kb.fadd(x, other),
                                      kb.fsub(other, x), pick);
      }
    }
    Value scale = kb.splat(kb.f32(hadamard::scale(dim)), lanes);
    for (unsigned k = 0; k < vectors; ++k) {
      Value x = kb.fmul(v[k], scale);
      if (!forward)
        x = signs(x, k);
      memory.store(x, kb.add(first, kb.i32(k * lanes)));
    }
  });
}

/// The block's form: a stage is a parallelFor over every row's butterflies
/// (D/2 a row), the signs folded into the first stage and the scale into the
/// last.
static void rotateRowsByButterflies(KernelBuilder &kb, unsigned dim,
                                    unsigned rows, bool forward,
                                    ArrayRef<int32_t> masks,
                                    const RotationMemory &memory) {
  auto sign = [&](Value x, Value c) {
    return masks.empty() ? x : flipSigns(kb, x, getSignMask(kb, masks, c));
  };
  auto at = [&](Value row, Value c) {
    return kb.add(kb.mul(row, kb.i32(dim)), c);
  };
  // First stage: `load`, then the forward signs; last: the scale, then the
  // inverse signs.
  auto read = [&](bool first, Value row, Value c) {
    if (!first)
      return memory.loadRotated(at(row, c));
    Value x = memory.load(row, c, 1);
    return forward ? sign(x, c) : x;
  };
  auto write = [&](bool last, Value x, Value row, Value c) {
    if (last) {
      x = kb.fmul(x, kb.f32(hadamard::scale(dim)));
      if (!forward)
        x = sign(x, c);
    }
    memory.store(x, at(row, c));
  };
  if (dim == 1) {
    memory.parallelFor(rows, [&](Value row) {
      write(true, read(true, row, kb.i32(0)), row, kb.i32(0));
    });
    return;
  }
  unsigned half = dim / 2;
  for (unsigned h = 1; h < dim; h *= 2) {
    bool first = h == 1, last = h == half;
    memory.parallelFor(rows * half, [&](Value i) {
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
}

unsigned kvq::getRotationLanes(const TargetInfo &info, unsigned dim) {
  return info.blockThreads == 1 ? std::min(info.vectorLanes, dim) : 1;
}

void kvq::rotateRows(KernelBuilder &kb, std::optional<unsigned> seed,
                     unsigned dim, unsigned rows, RotationDirection direction,
                     unsigned lanes, const RotationMemory &memory) {
  assert(llvm::isPowerOf2_32(dim) && "the verifier requires it");
  bool reassociate = kb.getReassociate();
  kb.setReassociate(false);
  SmallVector<int32_t> masks = getSignMasks(seed, dim);
  bool forward = direction == RotationDirection::Forward;
  if (lanes > 1)
    rotateRowsInLanes(kb, dim, rows, lanes, forward, masks, memory);
  else
    rotateRowsByButterflies(kb, dim, rows, forward, masks, memory);
  kb.setReassociate(reassociate);
}

void kvq::rotateRows(KernelBuilder &kb, QuantAttr quant, unsigned dim,
                     unsigned rows, RotationDirection direction, Value to,
                     RotationLoad load) {
  KernelTarget &target = kb.getTarget();
  auto loadRotated = [&](Value at) { return kb.loadF32(to, at); };
  auto store = [&](Value x, Value at) {
    if (isa<VectorType>(x.getType()))
      kb.store(x, to, kb.mul(kb.toI64(at), kb.i64(4)), 4);
    else
      kb.storeF32(x, to, at);
  };
  auto parallelFor = [&](unsigned count, function_ref<void(Value)> body) {
    target.parallelFor(kb, kb.i32(count), body);
  };
  rotateRows(kb, quant.getRotateSeed(), dim, rows, direction,
             getRotationLanes(target.getInfo(), dim),
             {load, loadRotated, store, parallelFor});
}
