//===- CodePacking.cpp - codes into 32-bit words --------------------------===//

#include "kvq/Codegen/CodePacking.h"

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
