//===- AttendRope.cpp - attention over pre-RoPE keys ----------------------===//
//
// A layer whose keys are cached before the rotary embedding scores key t as
// q . R(t) k^: every key (sink, quantized and window alike) is dequantized
// element by element and rotated by RopeBuilder at its position in the
// sequence, on both targets (docs/Numerics.md, "Pre-RoPE keys"). An
// unrotated query is rotated to the new token's position, tokens - 1, as it
// is loaded (AttendEmitter::loadQueries).
//
//===----------------------------------------------------------------------===//

#include "AttendEmitter.h"

using namespace mlir;
using namespace kvq;
using namespace kvq::attend;

Value AttendEmitter::queryPosition() {
  Value last = kb.maxS(kb.sub(tokens, kb.i32(1)), kb.i32(0));
  return kb.select(kb.eq(args.rotateQuery, kb.i32(0)), kb.i32(0), last);
}

SmallVector<Value> AttendEmitter::rotatedKeyDots(unsigned region, Value t) {
  const TensorLayout &keys = tensor(true);
  Type dtype = model.getDtype();
  std::function<Value(Value)> load;
  std::optional<SliceAccess> access;
  Value base, row;
  if (region == 1) {
    Value index = kb.sub(t, regions[0].sink);
    access.emplace(kb, keys, slice(true), layout.pageTokens, args.pages[0],
                   tableRow(true), index, head);
    Value pageToken = kb.remU(index, kb.i32(layout.pageTokens));
    load = [&, pageToken](Value c) {
      return dequantizeAt(*access, /*isKeys=*/true, pageToken, c);
    };
  } else {
    bool isSink = region == 0;
    Value token =
        isSink ? t : kb.sub(t, kb.add(regions[0].sink, regions[0].quantized));
    row = isSink ? fullPrecisionRow(kb, model, keys.window.getSink(), slot,
                                    token, head)
                 : windowTokenRow(/*isKeys=*/true, token);
    base = isSink ? args.sink[0] : args.window[0];
    load = [&](Value c) {
      return kb.loadFloat(dtype, base, kb.add(row, c), /*invariant=*/true);
    };
  }
  SmallVector<Value> init(heads, kb.f32(0));
  return rope->foldRotated(
      t, dim, init, load,
      [&](Value c, Value key, ValueRange acc) -> SmallVector<Value> {
        SmallVector<Value> next;
        for (unsigned r = 0; r < heads; ++r)
          next.push_back(kb.fadd(acc[r], kb.fmul(queryAt(queries, r, c), key)));
        return next;
      });
}
