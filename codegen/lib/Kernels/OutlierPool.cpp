//===- OutlierPool.cpp - OTT outlier tracking -----------------------------===//
//
// The `track` kernel: block h runs OTT's tracking for kv-head h of one
// sequence over the flush units of keys and values, before the flush kernels
// quantize them (read and written in place, as the flush reads them:
// FlushSource) (docs/Numerics.md, "Outlier tokens (OTT)"). Per unit, each
// step a loop the block's threads share (`scf.parallel`: on the GPU,
// barriers between them), its scratch block-local memory:
//   1. every candidate (pool slot or unit token) gets its key's L1 norm;
//   2. every candidate counts the candidates ranked before it by (norm,
//      position): the first `capacity` are kept;
//   3. one thread updates the pool, tiny and serial: drops move to the
//      extra pool (or tracking stops when they do not fit), entering tokens
//      take the freed slots;
//   4. entering tokens' rows are copied into their slots;
//   5. per channel, entering tokens' rows become the mean of the
//      unit's other tokens, which is what the flush kernels then quantize.
// Keys and values leave the window together (the layout checks their
// windows are equal), so one kernel sees both, with one ring head.
//
// The kernel is one program for both targets, built like the key norms'
// (ProgramBuilder.h).
//
//===----------------------------------------------------------------------===//

#include "OutlierPool.h"
#include "kvq/Codegen/ProgramBuilder.h"

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/SliceAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace kvq;

Value pool::indexWord(KernelBuilder &kb, const CacheLayout &layout, Value slot,
                      Value head, Value word) {
  Value index = kb.add(kb.mul(slot, kb.i32(layout.model.getKvHeads())), head);
  return kb.add(kb.mul(index, kb.i32(layout.pool.getIndexWords())), word);
}

Value pool::positionWord(KernelBuilder &kb, const CacheLayout &layout,
                         Value slot, Value head, Value entry) {
  return indexWord(kb, layout, slot, head,
                   kb.add(entry, kb.i32(PoolLayoutAttr::kHeaderWords)));
}

Value pool::entryRow(KernelBuilder &kb, const CacheLayout &layout, Value slot,
                     Value entry, Value head) {
  return fullPrecisionRow(kb, layout.model, layout.pool.getEntries(), slot,
                          entry, head);
}

namespace {

/// A dest slot for tokens that stay in their unit.
constexpr int64_t kStays = -1;

/// Builds the track program; pairs of buffers are (keys, values).
class TrackProgram {
public:
  TrackProgram(OpBuilder &b, Location loc, const CacheLayout &layout)
      : pb(b, loc), layout(layout), model(layout.model),
        capacity(layout.pool.getCapacity()),
        flush(layout.keys.window.getFlush()), dim(model.getHeadDim()) {}

  void build(StringRef name);

private:
  using A = abi::TrackArgs;

  Value arg(unsigned id) { return func.getArgument(id); }
  /// Word `w` of the block's kv-head's pool index.
  Value word(unsigned w) {
    return pool::indexWord(pb, layout, pb.i32(0), head, pb.i32(w));
  }
  Value readWord(unsigned w) {
    return pb.loadElement(arg(A::PoolIndex), word(w));
  }
  Value position(Value entry) {
    return pool::positionWord(pb, layout, pb.i32(0), head, entry);
  }
  /// Flushed token `token` of keys (x = 0) or values: its buffer and the
  /// element offset of its row there. Keys and values share ring rows.
  std::pair<Value, Value> flushed(unsigned x, Value token) {
    return source[x].row(pb, model, token, head);
  }
  /// The element offset of a pool entry's row.
  Value entryRow(Value entry) {
    return pool::entryRow(pb, layout, pb.i32(0), entry, head);
  }
  Value poolOf(unsigned x) { return arg(x == 0 ? A::KPool : A::VPool); }
  /// Copies element `c` of a row.
  void copyElement(Value src, Value srcRow, Value dst, Value dstRow, Value c) {
    pb.storeElement(pb.loadElement(src, pb.add(srcRow, c)), dst,
                    pb.add(dstRow, c));
  }
  Value keyMetric(Value keys, Value row);

  void scoreCandidates(Value unitStart);
  void selectCandidates();
  void updatePool(Value unitStart);
  void copyEntering(Value unitStart);
  void replaceEntering(Value unitStart);

  ProgramBuilder pb;
  const CacheLayout &layout;
  ModelAttr model;
  unsigned capacity, flush, dim;
  func::FuncOp func;
  Value head;
  FlushSource source[2];
  /// Candidates are the pool's slots [0, capacity), then the unit's tokens.
  Value metrics, positions, kept;
  /// Per unit token: its pool slot, or kStays. Dropped slots in order.
  Value dest, freed;
  /// [0]: the unit was tracked; [1]: the tokens that stay.
  Value control;
};

} // namespace

// The L1 norm in fp32, channel by channel in order (the reference's order:
// the ranking compares these bits).
Value TrackProgram::keyMetric(Value keys, Value row) {
  return pb.forLoop(pb.i32(0), pb.i32(dim), pb.i32(1), {pb.f32(0)},
                    [&](Value c, ValueRange acc) -> SmallVector<Value> {
                      Value x = pb.loadElementAsF32(keys, pb.add(row, c));
                      return {pb.fadd(acc[0], pb.fabs(x))};
                    })[0];
}

void TrackProgram::scoreCandidates(Value unitStart) {
  Value poolCount = readWord(pool::PoolCount);
  float inf = std::numeric_limits<float>::infinity();
  Type f32 = pb.builder().getF32Type(), i32 = pb.builder().getI32Type();
  pb.parallelFor(capacity + flush, [&](Value at) {
    Value i = pb.indexToI32(at);
    SmallVector<Value> result = pb.ifThenElse(
        pb.ult(i, pb.i32(capacity)), {f32, i32},
        [&]() -> SmallVector<Value> {
          // Empty slots are no candidates: they rank last and are skipped.
          Value metric = pb.ifThenElse(
              pb.ult(i, poolCount), {f32},
              [&]() -> SmallVector<Value> {
                return {keyMetric(poolOf(0), entryRow(i))};
              },
              [&]() -> SmallVector<Value> { return {pb.f32(inf)}; })[0];
          return {metric, pb.loadElement(arg(A::PoolIndex), position(i))};
        },
        [&]() -> SmallVector<Value> {
          Value token = pb.add(unitStart, pb.sub(i, pb.i32(capacity)));
          auto [keys, row] = flushed(0, token);
          return {keyMetric(keys, row), pb.add(arg(A::FirstPos), token)};
        });
    pb.storeElement(result[0], metrics, at);
    pb.storeElement(result[1], positions, at);
  });
}

// Candidate i is kept when fewer than `capacity` candidates rank before it
// by (metric, position); positions are distinct, so the order is total.
void TrackProgram::selectCandidates() {
  Value poolCount = readWord(pool::PoolCount);
  unsigned count = capacity + flush;
  // Slot j holds a candidate where it is used; every unit token is one.
  auto isCandidate = [&](Value j) {
    return pb.bitOr(pb.ult(pb.i32(capacity - 1), j), pb.ult(j, poolCount));
  };
  pb.parallelFor(count, [&](Value at) {
    Value metric = pb.loadElement(metrics, at);
    Value pos = pb.loadElement(positions, at);
    Value before = pb.forLoop(
        pb.i32(0), pb.i32(count), pb.i32(1), {pb.i32(0)},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value other = pb.loadElement(metrics, j);
          Value otherPos = pb.loadElement(positions, j);
          Value ranksBefore =
              pb.bitOr(pb.flt(other, metric),
                       pb.bitAnd(pb.feq(other, metric), pb.ult(otherPos, pos)));
          return {
              pb.add(acc[0], pb.select(pb.bitAnd(isCandidate(j), ranksBefore),
                                       pb.i32(1), pb.i32(0)))};
        })[0];
    Value isKept = pb.bitAnd(isCandidate(pb.indexToI32(at)),
                             pb.ult(before, pb.i32(capacity)));
    pb.storeElement(pb.select(isKept, pb.i32(1), pb.i32(0)), kept, at);
  });
}

// One thread: the pool's bookkeeping for the unit (docs/Numerics.md): drops
// to the extra pool in slot order, or stop when they do not fit; entering
// tokens into the freed slots, then after the last used one.
void TrackProgram::updatePool(Value unitStart) {
  unsigned extra = layout.pool.getExtra();
  Value index = arg(A::PoolIndex);
  auto count = [&](Value flag) {
    return pb.select(flag, pb.i32(1), pb.i32(0));
  };
  pb.parallelFor(1, [&](Value) {
    Value poolCount = readWord(pool::PoolCount);
    Value extraCount = readWord(pool::ExtraCount);
    Value stopped = readWord(pool::Stopped);
    auto isDropped = [&](Value s) {
      return pb.eq(pb.loadElement(kept, s), pb.i32(0));
    };
    Value drops =
        pb.forLoop(pb.i32(0), poolCount, pb.i32(1), {pb.i32(0)},
                   [&](Value s, ValueRange acc) -> SmallVector<Value> {
                     return {pb.add(acc[0], count(isDropped(s)))};
                   })[0];
    Value tracking = pb.eq(stopped, pb.i32(0));
    Value fits = pb.bitAnd(
        tracking, pb.ult(pb.add(extraCount, drops), pb.i32(extra + 1)));
    pb.storeElement(count(fits), control, pb.i32(0));
    pb.ifThen(pb.bitAnd(tracking, pb.eq(fits, pb.i1(false))),
              [&] { pb.storeElement(pb.i32(1), index, word(pool::Stopped)); });
    pb.ifThen(fits, [&] {
      // Dropped slots, in order, move to the extra pool.
      pb.forLoop(pb.i32(0), poolCount, pb.i32(1), {pb.i32(0)},
                 [&](Value s, ValueRange acc) -> SmallVector<Value> {
                   Value drop = isDropped(s);
                   pb.ifThen(drop, [&] {
                     Value to =
                         pb.add(pb.i32(capacity), pb.add(extraCount, acc[0]));
                     for (unsigned x = 0; x < 2; ++x)
                       pb.forEach(pb.i32(0), pb.i32(dim), [&](Value c) {
                         copyElement(poolOf(x), entryRow(s), poolOf(x),
                                     entryRow(to), c);
                       });
                     pb.storeElement(pb.loadElement(index, position(s)), index,
                                     position(to));
                     pb.storeElement(s, freed, acc[0]);
                   });
                   return {pb.add(acc[0], count(drop))};
                 });
      pb.storeElement(pb.add(extraCount, drops), index, word(pool::ExtraCount));
      // Entering tokens take the freed slots, then slots past the last.
      Value entering = pb.forLoop(
          pb.i32(0), pb.i32(flush), pb.i32(1), {pb.i32(0)},
          [&](Value t, ValueRange acc) -> SmallVector<Value> {
            Value enters = pb.eq(
                pb.loadElement(kept, pb.add(t, pb.i32(capacity))), pb.i32(1));
            Value slot = pb.ifThenElse(
                pb.ult(acc[0], drops), {pb.builder().getI32Type()},
                [&]() -> SmallVector<Value> {
                  return {pb.loadElement(freed, acc[0])};
                },
                [&]() -> SmallVector<Value> {
                  return {pb.add(poolCount, pb.sub(acc[0], drops))};
                })[0];
            pb.storeElement(pb.select(enters, slot, pb.i32(kStays)), dest, t);
            pb.ifThen(enters, [&] {
              pb.storeElement(pb.add(arg(A::FirstPos), pb.add(unitStart, t)),
                              index, position(slot));
            });
            return {pb.add(acc[0], count(enters))};
          })[0];
      Value grown = pb.select(pb.ult(drops, entering), pb.sub(entering, drops),
                              pb.i32(0));
      pb.storeElement(pb.add(poolCount, grown), index, word(pool::PoolCount));
      pb.storeElement(pb.sub(pb.i32(flush), entering), control, pb.i32(1));
    });
  });
}

void TrackProgram::copyEntering(Value unitStart) {
  Value tracked = pb.eq(pb.loadElement(control, pb.i32(0)), pb.i32(1));
  pb.parallelFor(flush * dim, [&](Value at) {
    Value i = pb.indexToI32(at);
    Value t = pb.divU(i, pb.i32(dim)), c = pb.remU(i, pb.i32(dim));
    Value slot = pb.loadElement(dest, t);
    Value enters = pb.eq(pb.eq(slot, pb.i32(kStays)), pb.i1(false));
    pb.ifThen(pb.bitAnd(tracked, enters), [&] {
      for (unsigned x = 0; x < 2; ++x) {
        auto [buffer, row] = flushed(x, pb.add(unitStart, t));
        copyElement(buffer, row, poolOf(x), entryRow(slot), c);
      }
    });
  });
}

// Per channel of keys and values: the fp32 sum of the staying tokens in
// token order, one true division, rounded to the model dtype (0 when every
// token enters), written over the entering tokens.
void TrackProgram::replaceEntering(Value unitStart) {
  Value tracked = pb.eq(pb.loadElement(control, pb.i32(0)), pb.i32(1));
  Value staying = pb.loadElement(control, pb.i32(1));
  Type dtype = model.getDtype();
  pb.parallelFor(2 * dim, [&](Value at) {
    pb.ifThen(tracked, [&] {
      Value i = pb.indexToI32(at);
      Value c = pb.remU(i, pb.i32(dim));
      Value isKeys = pb.ult(i, pb.i32(dim));
      // Token t's buffer and the element offset of channel c in it.
      auto element = [&](Value t) -> std::pair<Value, Value> {
        auto [keys, row] = flushed(0, pb.add(unitStart, t));
        Value values = flushed(1, pb.add(unitStart, t)).first;
        return {pb.select(isKeys, keys, values), pb.add(row, c)};
      };
      auto stays = [&](Value t) {
        return pb.eq(pb.loadElement(dest, t), pb.i32(kStays));
      };
      Value sum =
          pb.forLoop(pb.i32(0), pb.i32(flush), pb.i32(1), {pb.f32(0)},
                     [&](Value t, ValueRange acc) -> SmallVector<Value> {
                       auto [buffer, offset] = element(t);
                       Value x = pb.loadElementAsF32(buffer, offset);
                       return {pb.select(stays(t), pb.fadd(acc[0], x), acc[0])};
                     })[0];
      Value mean = pb.select(pb.eq(staying, pb.i32(0)), pb.f32(0),
                             pb.fdiv(sum, pb.uitofp(staying)));
      Value narrow =
          dtype.isF32()
              ? mean
              : arith::TruncFOp::create(pb.builder(), pb.getLoc(), dtype, mean);
      pb.forEach(pb.i32(0), pb.i32(flush), [&](Value t) {
        pb.ifThen(pb.eq(stays(t), pb.i1(false)), [&] {
          auto [buffer, offset] = element(t);
          pb.storeElement(narrow, buffer, offset);
        });
      });
    });
  });
}

void TrackProgram::build(StringRef name) {
  OpBuilder &b = pb.builder();
  Type dtype = model.getDtype(), i32 = b.getI32Type(), f32 = b.getF32Type();
  SmallVector<Type> args(A::NumArgs, i32);
  for (unsigned id :
       {A::KWindow, A::VWindow, A::KInput, A::VInput, A::KPool, A::VPool})
    args[id] = ProgramBuilder::getBufferType(dtype);
  args[A::PoolIndex] = ProgramBuilder::getBufferType(i32);
  OpBuilder::InsertionGuard guard(b);
  func = pb.createProgram(name, args);
  unsigned ring = layout.keys.windowCapacity;
  source[0] = {arg(A::KWindow), arg(A::KInput), arg(A::WindowHead),
               arg(A::WindowTokens), ring};
  source[1] = {arg(A::VWindow), arg(A::VInput), arg(A::WindowHead),
               arg(A::WindowTokens), ring};
  unsigned candidates = capacity + flush;
  metrics = pb.allocBlockLocal(f32, candidates);
  positions = pb.allocBlockLocal(i32, candidates);
  kept = pb.allocBlockLocal(i32, candidates);
  dest = pb.allocBlockLocal(i32, flush);
  freed = pb.allocBlockLocal(i32, capacity);
  control = pb.allocBlockLocal(i32, 2);
  head = pb.getBlockId();
  Value units = pb.divU(arg(A::NumTokens), pb.i32(flush));
  pb.forEach(pb.i32(0), units, [&](Value unit) {
    Value unitStart = pb.mul(unit, pb.i32(flush));
    scoreCandidates(unitStart);
    selectCandidates();
    updatePool(unitStart);
    copyEntering(unitStart);
    replaceEntering(unitStart);
  });
  func::ReturnOp::create(b, pb.getLoc());
}

void kvq::buildTrackProgram(OpBuilder &b, Location loc, const KernelSpec &spec,
                            const CacheLayout &layout) {
  TrackProgram(b, loc, layout).build(spec.name);
}
