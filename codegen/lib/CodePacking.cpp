//===- CodePacking.cpp - codes into 32-bit words --------------------------===//

#include "kvq/Codegen/CodePacking.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace kvq;

std::optional<WordShift> kvq::shiftIntoWord(int64_t bit, unsigned bits,
                                            unsigned w) {
  int64_t first = 32 * int64_t(w);
  if (bit >= first + 32 || bit + bits <= first)
    return std::nullopt;
  return WordShift{int32_t(std::max<int64_t>(bit - first, 0)),
                   int32_t(std::max<int64_t>(first - bit, 0))};
}

SmallVector<Value> kvq::packWords(KernelBuilder &kb, unsigned count,
                                  unsigned bits,
                                  function_ref<Value(unsigned k)> code) {
  SmallVector<Value> words(llvm::divideCeil(uint64_t(count) * bits, 32));
  for (unsigned k = 0; k < count; ++k) {
    Value c = code(k);
    for (unsigned w = k * bits / 32; w < words.size(); ++w) {
      std::optional<WordShift> shift =
          shiftIntoWord(int64_t(k) * bits, bits, w);
      if (!shift)
        break;
      Value part = shift->right ? kb.shrU(c, kb.i32Like(c, shift->right))
                                : kb.shl(c, kb.i32Like(c, shift->left));
      words[w] = words[w] ? kb.bitOr(words[w], part) : part;
    }
  }
  return words;
}

Value kvq::unpackHalves(KernelBuilder &kb, Value bytes, unsigned bits,
                        ArrayRef<unsigned> halfBits) {
  unsigned last = cast<VectorType>(bytes.getType()).getNumElements() - 1;
  unsigned lanes = halfBits.size() / 2;
  SmallVector<int64_t> gather;
  SmallVector<int16_t> halfShifts;
  bool laneShifts = true;
  for (auto [i, bit] : llvm::enumerate(halfBits)) {
    unsigned byte = bit / 8;
    gather.append({byte, std::min(byte + 1, last)});
    halfShifts.push_back(bit % 8);
    laneShifts &= i % 2 == 0 || bit % 8 == halfBits[i - 1] % 8;
  }
  OpBuilder &b = kb.builder();
  Location loc = kb.getLoc();
  Value gathered = kb.shuffle(bytes, gather);
  auto laneType = VectorType::get({lanes}, b.getI32Type());
  int32_t mask = (1 << bits) - 1;
  if (laneShifts) {
    SmallVector<int32_t> shifts;
    for (unsigned l = 0; l < lanes; ++l)
      shifts.push_back(halfShifts[2 * l]);
    Value words = vector::BitCastOp::create(b, loc, laneType, gathered);
    return kb.bitAnd(kb.shrU(words, kb.vectorI32(shifts)),
                     kb.splat(kb.i32(mask | mask << 16), lanes));
  }
  auto halfType = VectorType::get({2 * lanes}, b.getI16Type());
  auto halfConstant = [&](ArrayRef<int16_t> values) -> Value {
    return arith::ConstantOp::create(b, loc, halfType,
                                     DenseElementsAttr::get(halfType, values));
  };
  Value halves = vector::BitCastOp::create(b, loc, halfType, gathered);
  Value codes =
      kb.bitAnd(kb.shrU(halves, halfConstant(halfShifts)),
                halfConstant(SmallVector<int16_t>(2 * lanes, int16_t(mask))));
  return vector::BitCastOp::create(b, loc, laneType, codes);
}
