//===- AttendReorder.cpp - attention over reordered channels --------------===//
//
// SKVQ's channel reorder in the attend kernel, on every target. Keys: a
// token's groups have variable sizes and start on words; each group's codes
// are dotted with the query permuted like the keys (loadQueries), and its
// scale and zero-point folded once per group, so the score is the
// unpermuted q . k^. Values: channel c is read at its position, so the
// output accumulates in original channel order (nothing to permute back);
// pre-RoPE keys (AttendRope.cpp) are read the same way, channel by channel.
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"
#include "ChannelTables.h"

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

SmallVector<Value> AttendEmitter::reorderedKeyDots(SliceAccess &access,
                                                   Value pageToken) {
  const SliceLayout &keys = slice(true);
  Quantizer quantizer(kb, keys.quant);
  ChannelTables tables(kb, layout, layers, /*isKeys=*/true, head);
  Value tokenWord = kb.mul(pageToken, kb.i32(keys.WordsPerToken));
  SmallVector<Value> dots(heads, kb.f32(0));
  return kb.forLoop(
      kb.i32(0), kb.i32(keys.GroupsPerToken), kb.i32(1), dots,
      [&](Value g, ValueRange acc) -> SmallVector<Value> {
        Value start = tables.groupStart(g);
        Value word = kb.add(tokenWord, tables.groupWord(g));
        SmallVector<Value> codeDots = kb.forLoop(
            kb.i32(0), tables.groupSize(g), kb.i32(1),
            SmallVector<Value>(heads, kb.f32(0)),
            [&](Value k, ValueRange sums) -> SmallVector<Value> {
              Value code = kb.uitofp(access.loadCodeAt(word, k));
              Value position = kb.add(start, k);
              SmallVector<Value> next;
              for (unsigned r = 0; r < heads; ++r)
                next.push_back(kb.fadd(
                    sums[r], kb.fmul(queryAt(normQueries, r, position), code)));
              return next;
            });
        Value n = kb.add(kb.mul(pageToken, kb.i32(keys.GroupsPerToken)), g);
        Value scale = access.loadScale(quantizer, n);
        Value zero = access.loadZero(quantizer, n);
        SmallVector<Value> next;
        for (unsigned r = 0; r < heads; ++r)
          next.push_back(
              kb.fadd(acc[r], quantizer.foldedDot(scale, zero, codeDots[r],
                                                  groupSum(r, g))));
        return next;
      });
}

Value AttendEmitter::reorderedAt(SliceAccess &access, bool isKeys,
                                 Value pageToken, Value c) {
  const SliceLayout &scheme = slice(isKeys);
  Quantizer quantizer(kb, scheme.quant);
  ChannelTables tables(kb, layout, layers, isKeys, head);
  Value position = tables.positionOf(c);
  Value g = tables.groupOf(position);
  Value word = kb.add(kb.mul(pageToken, kb.i32(scheme.WordsPerToken)),
                      tables.groupWord(g));
  Value code = access.loadCodeAt(word, kb.sub(position, tables.groupStart(g)));
  Value n = kb.add(kb.mul(pageToken, kb.i32(scheme.GroupsPerToken)), g);
  return DequantizeOp::create(kb.builder(), kb.getLoc(),
                              kb.builder().getF32Type(), code,
                              access.loadScale(quantizer, n),
                              access.loadZero(quantizer, n), scheme.quant);
}
