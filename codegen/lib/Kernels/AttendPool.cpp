//===- AttendPool.cpp - the attend kernel's OTT pool region ---------------===//
//
// With OTT pools, a slice's tokens are [0, tokens) as without them, followed
// by its pool entries [tokens, poolEnd): the pool's slots, then the extra
// pool's, attended at full precision like window tokens and split across
// blocks like any token. Every entry's token also has a quantized slot,
// holding the mean that replaced it: its score is set to -inf before the
// softmax, so it weighs 0 (docs/Numerics.md, "Outlier tokens (OTT)").
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"
#include "OutlierPool.h"

#include <limits>

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

Value AttendEmitter::countPoolEntries() {
  auto word = [&](unsigned w) {
    return kb.loadU32(args.poolIndex,
                      pool::indexWord(kb, layout, slot, head, kb.i32(w)),
                      /*invariant=*/true);
  };
  return kb.add(word(pool::PoolCount), word(pool::ExtraCount));
}

void AttendEmitter::scorePool(Range range) {
  Value count = kb.sub(range.end, range.begin);
  kb.getTarget().parallelFor(kb, count, [&](Value i) {
    Value t = kb.add(range.begin, i);
    Value row = pool::entryRow(kb, layout, slot, kb.sub(t, tokens), head);
    SmallVector<Value> dots = fullPrecisionDots(args.pool[0], row, queries);
    Value local = kb.sub(t, splitRange.begin);
    for (unsigned r = 0; r < heads; ++r)
      kb.storeF32(dots[r], scores, kb.add(kb.i32(r * splitTokens), local));
  });
}

void AttendEmitter::maskPooledTokens() {
  Value entries = kb.sub(poolEnd, tokens);
  float inf = std::numeric_limits<float>::infinity();
  kb.getTarget().parallelFor(kb, entries, [&](Value e) {
    Value pos = kb.loadU32(args.poolIndex,
                           pool::positionWord(kb, layout, slot, head, e),
                           /*invariant=*/true);
    // Unsigned: positions before the split wrap around past its end.
    Value local = kb.sub(pos, splitRange.begin);
    Value inSplit = kb.ult(local, kb.sub(splitRange.end, splitRange.begin));
    kb.ifThen(inSplit, [&] {
      for (unsigned r = 0; r < heads; ++r)
        kb.storeF32(kb.f32(-inf), scores,
                    kb.add(kb.i32(r * splitTokens), local));
    });
  });
}

Value AttendEmitter::poolValueAt(Value t, Value c) {
  Value row = pool::entryRow(kb, layout, slot, kb.sub(t, tokens), head);
  return kb.loadFloat(model.getDtype(), args.pool[1], kb.add(row, c),
                      /*invariant=*/true);
}
