//===- OutlierPool.cpp - OTT outlier tracking -----------------------------===//
//
// The `track` kernel: block h runs OTT's tracking for kv-head h of one
// sequence over the flush units of keys and values, before the flush kernels
// quantize them (read and written in place, as the flush reads them:
// FlushSource) (docs/Numerics.md, "Outlier tokens (OTT)"). Per
// unit, separated by block barriers:
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
//===----------------------------------------------------------------------===//

#include "OutlierPool.h"

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

/// The arguments of kvq/ABI/KernelABI.h; pairs are (keys, values).
struct TrackArgs {
  using A = abi::TrackArgs;
  Value pool[2], index, firstPos, numTokens;
  FlushSource source[2];
  TrackArgs(const KernelEntry &e, unsigned capacity)
      : pool{e.args[A::KPool], e.args[A::VPool]}, index(e.args[A::PoolIndex]),
        firstPos(e.args[A::FirstPos]), numTokens(e.args[A::NumTokens]),
        source{{e.args[A::KWindow], e.args[A::KInput], e.args[A::WindowHead],
                e.args[A::WindowTokens], capacity},
               {e.args[A::VWindow], e.args[A::VInput], e.args[A::WindowHead],
                e.args[A::WindowTokens], capacity}} {}
};

/// A dest slot for tokens that stay in their unit.
constexpr int64_t kStays = -1;

class TrackEmitter {
public:
  TrackEmitter(KernelBuilder &kb, const KernelEntry &entry,
               const CacheLayout &layout)
      : kb(kb), layout(layout), model(layout.model),
        args(entry, layout.keys.windowCapacity), head(entry.blockId[0]),
        capacity(layout.pool.getCapacity()),
        flush(layout.keys.window.getFlush()), dim(model.getHeadDim()) {}

  void emit();

private:
  Value word(unsigned w) {
    return pool::indexWord(kb, layout, kb.i32(0), head, kb.i32(w));
  }
  Value position(Value entry) {
    return pool::positionWord(kb, layout, kb.i32(0), head, entry);
  }
  void storeU32(Value value, Value ptr, Value index) {
    kb.store(value, ptr, kb.mul(kb.toI64(index), kb.i64(4)), 4);
  }
  /// Flushed token `token` of keys (x = 0) or values: its buffer and the
  /// element offset of its row there. Keys and values share ring rows.
  std::pair<Value, Value> flushed(unsigned x, Value token) {
    return args.source[x].row(kb, model, token, head);
  }
  /// The element offset of a pool entry's row.
  Value entryRow(Value entry) {
    return pool::entryRow(kb, layout, kb.i32(0), entry, head);
  }
  /// Copies element `c` of a row as raw bits.
  void copyElement(Value src, Value srcRow, Value dst, Value dstRow, Value c);
  Value keyMetric(Value ptr, Value row);

  void scoreCandidates(Value unitStart);
  void selectCandidates();
  void updatePool(Value unitStart);
  void copyEntering(Value unitStart);
  void replaceEntering(Value unitStart);

  KernelBuilder &kb;
  const CacheLayout &layout;
  ModelAttr model;
  TrackArgs args;
  Value head;
  unsigned capacity, flush, dim;
  /// Candidates are the pool's slots [0, capacity), then the unit's tokens.
  Value metrics, positions, kept;
  /// Per unit token: its pool slot, or kStays. Dropped slots in order.
  Value dest, freed;
  /// [0]: the unit was tracked; [1]: the tokens that stay.
  Value control;
};

} // namespace

void TrackEmitter::copyElement(Value src, Value srcRow, Value dst, Value dstRow,
                               Value c) {
  unsigned bytes = layout.dtypeBytes;
  Type bits = kb.builder().getIntegerType(bytes * 8);
  auto offset = [&](Value row) {
    return kb.mul(kb.toI64(kb.add(row, c)), kb.i64(bytes));
  };
  kb.store(kb.load(bits, src, offset(srcRow), bytes), dst, offset(dstRow),
           bytes);
}

// The L1 norm in fp32, channel by channel in order (the reference's order:
// the ranking compares these bits).
Value TrackEmitter::keyMetric(Value ptr, Value row) {
  return kb.forLoop(kb.i32(0), kb.i32(dim), kb.i32(1), {kb.f32(0)},
                    [&](Value c, ValueRange acc) -> SmallVector<Value> {
                      Value x =
                          kb.loadFloat(model.getDtype(), ptr, kb.add(row, c));
                      return {kb.fadd(acc[0], kb.fabs(x))};
                    })[0];
}

void TrackEmitter::scoreCandidates(Value unitStart) {
  Value poolCount = kb.loadU32(args.index, word(pool::PoolCount));
  float inf = std::numeric_limits<float>::infinity();
  kb.getTarget().parallelFor(kb, kb.i32(capacity + flush), [&](Value i) {
    Value isSlot = kb.ult(i, kb.i32(capacity));
    SmallVector<Value> result = kb.ifThenElse(
        isSlot, {kb.builder().getF32Type(), kb.builder().getI32Type()},
        [&]() -> SmallVector<Value> {
          // Empty slots are no candidates: they rank last and are skipped.
          Value used = kb.ult(i, poolCount);
          Value metric = kb.ifThenElse(
              used, {kb.builder().getF32Type()},
              [&]() -> SmallVector<Value> {
                return {keyMetric(args.pool[0], entryRow(i))};
              },
              [&]() -> SmallVector<Value> { return {kb.f32(inf)}; })[0];
          return {metric, kb.loadU32(args.index, position(i))};
        },
        [&]() -> SmallVector<Value> {
          Value token = kb.add(unitStart, kb.sub(i, kb.i32(capacity)));
          auto [keys, row] = flushed(0, token);
          return {keyMetric(keys, row), kb.add(args.firstPos, token)};
        });
    kb.storeF32(result[0], metrics, i);
    storeU32(result[1], positions, i);
  });
}

// Candidate i is kept when fewer than `capacity` candidates rank before it
// by (metric, position); positions are distinct, so the order is total.
void TrackEmitter::selectCandidates() {
  Value poolCount = kb.loadU32(args.index, word(pool::PoolCount));
  unsigned count = capacity + flush;
  kb.getTarget().parallelFor(kb, kb.i32(count), [&](Value i) {
    Value metric = kb.loadF32(metrics, i);
    Value pos = kb.loadU32(positions, i);
    Value before = kb.forLoop(
        kb.i32(0), kb.i32(count), kb.i32(1), {kb.i32(0)},
        [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value other = kb.loadF32(metrics, j);
          Value otherPos = kb.loadU32(positions, j);
          Value valid =
              kb.bitOr(kb.ult(kb.i32(capacity - 1), j), kb.ult(j, poolCount));
          Value ranksBefore =
              kb.bitOr(kb.flt(other, metric),
                       kb.bitAnd(kb.feq(other, metric), kb.ult(otherPos, pos)));
          return {kb.add(acc[0], kb.select(kb.bitAnd(valid, ranksBefore),
                                           kb.i32(1), kb.i32(0)))};
        })[0];
    Value valid =
        kb.bitOr(kb.ult(kb.i32(capacity - 1), i), kb.ult(i, poolCount));
    Value isKept = kb.bitAnd(valid, kb.ult(before, kb.i32(capacity)));
    storeU32(kb.select(isKept, kb.i32(1), kb.i32(0)), kept, i);
  });
}

// One thread: the pool's bookkeeping for the unit (docs/Numerics.md): drops
// to the extra pool in slot order, or stop when they do not fit; entering
// tokens into the freed slots, then after the last used one.
void TrackEmitter::updatePool(Value unitStart) {
  unsigned extra = layout.pool.getExtra();
  kb.getTarget().parallelFor(kb, kb.i32(1), [&](Value) {
    Value poolCount = kb.loadU32(args.index, word(pool::PoolCount));
    Value extraCount = kb.loadU32(args.index, word(pool::ExtraCount));
    Value stopped = kb.loadU32(args.index, word(pool::Stopped));
    Value drops = kb.forLoop(
        kb.i32(0), poolCount, kb.i32(1), {kb.i32(0)},
        [&](Value s, ValueRange acc) -> SmallVector<Value> {
          Value drop = kb.eq(kb.loadU32(kept, s), kb.i32(0));
          return {kb.add(acc[0], kb.select(drop, kb.i32(1), kb.i32(0)))};
        })[0];
    Value tracking = kb.eq(stopped, kb.i32(0));
    Value fits = kb.bitAnd(
        tracking, kb.ult(kb.add(extraCount, drops), kb.i32(extra + 1)));
    storeU32(kb.select(fits, kb.i32(1), kb.i32(0)), control, kb.i32(0));
    kb.ifThen(kb.bitAnd(tracking, kb.eq(fits, kb.i1(false))),
              [&] { storeU32(kb.i32(1), args.index, word(pool::Stopped)); });
    kb.ifThen(fits, [&] {
      // Dropped slots, in order, move to the extra pool.
      kb.forLoop(
          kb.i32(0), poolCount, kb.i32(1), {kb.i32(0)},
          [&](Value s, ValueRange acc) -> SmallVector<Value> {
            Value drop = kb.eq(kb.loadU32(kept, s), kb.i32(0));
            kb.ifThen(drop, [&] {
              Value to = kb.add(kb.i32(capacity), kb.add(extraCount, acc[0]));
              for (unsigned t = 0; t < 2; ++t)
                kb.forEach(kb.i32(0), kb.i32(dim), [&](Value c) {
                  copyElement(args.pool[t], entryRow(s), args.pool[t],
                              entryRow(to), c);
                });
              storeU32(kb.loadU32(args.index, position(s)), args.index,
                       position(to));
              storeU32(s, freed, acc[0]);
            });
            return {kb.add(acc[0], kb.select(drop, kb.i32(1), kb.i32(0)))};
          });
      storeU32(kb.add(extraCount, drops), args.index, word(pool::ExtraCount));
      // Entering tokens take the freed slots, then slots past the last.
      Value entering = kb.forLoop(
          kb.i32(0), kb.i32(flush), kb.i32(1), {kb.i32(0)},
          [&](Value t, ValueRange acc) -> SmallVector<Value> {
            Value enters =
                kb.eq(kb.loadU32(kept, kb.add(t, kb.i32(capacity))), kb.i32(1));
            Value slot = kb.ifThenElse(
                kb.ult(acc[0], drops), {kb.builder().getI32Type()},
                [&]() -> SmallVector<Value> {
                  return {kb.loadU32(freed, acc[0])};
                },
                [&]() -> SmallVector<Value> {
                  return {kb.add(poolCount, kb.sub(acc[0], drops))};
                })[0];
            storeU32(kb.select(enters, slot, kb.i32(kStays)), dest, t);
            kb.ifThen(enters, [&] {
              storeU32(kb.add(args.firstPos, kb.add(unitStart, t)), args.index,
                       position(slot));
            });
            return {kb.add(acc[0], kb.select(enters, kb.i32(1), kb.i32(0)))};
          })[0];
      Value grown = kb.select(kb.ult(drops, entering), kb.sub(entering, drops),
                              kb.i32(0));
      storeU32(kb.add(poolCount, grown), args.index, word(pool::PoolCount));
      storeU32(kb.sub(kb.i32(flush), entering), control, kb.i32(1));
    });
  });
}

void TrackEmitter::copyEntering(Value unitStart) {
  Value tracked = kb.eq(kb.loadU32(control, kb.i32(0)), kb.i32(1));
  kb.getTarget().parallelFor(kb, kb.i32(flush * dim), [&](Value i) {
    Value t = kb.divU(i, kb.i32(dim)), c = kb.remU(i, kb.i32(dim));
    Value slot = kb.loadU32(dest, t);
    kb.ifThen(
        kb.bitAnd(tracked, kb.eq(kb.eq(slot, kb.i32(kStays)), kb.i1(false))),
        [&] {
          for (unsigned x = 0; x < 2; ++x) {
            auto [buffer, row] = flushed(x, kb.add(unitStart, t));
            copyElement(buffer, row, args.pool[x], entryRow(slot), c);
          }
        });
  });
}

// Per channel of keys and values: the fp32 sum of the staying tokens in
// token order, one true division, rounded to the model dtype (0 when every
// token enters), written over the entering tokens.
void TrackEmitter::replaceEntering(Value unitStart) {
  Value tracked = kb.eq(kb.loadU32(control, kb.i32(0)), kb.i32(1));
  Value staying = kb.loadU32(control, kb.i32(1));
  Type dtype = model.getDtype();
  unsigned bytes = layout.dtypeBytes;
  kb.getTarget().parallelFor(kb, kb.i32(2 * dim), [&](Value i) {
    kb.ifThen(tracked, [&] {
      Value c = kb.remU(i, kb.i32(dim));
      Value isKeys = kb.ult(i, kb.i32(dim));
      // Token t's buffer and the element offset of channel c in it.
      auto element = [&](Value t) -> std::pair<Value, Value> {
        auto [keys, row] = flushed(0, kb.add(unitStart, t));
        Value values = flushed(1, kb.add(unitStart, t)).first;
        return {kb.select(isKeys, keys, values), kb.add(row, c)};
      };
      Value sum =
          kb.forLoop(kb.i32(0), kb.i32(flush), kb.i32(1), {kb.f32(0)},
                     [&](Value t, ValueRange acc) -> SmallVector<Value> {
                       Value stays = kb.eq(kb.loadU32(dest, t), kb.i32(kStays));
                       auto [buffer, offset] = element(t);
                       Value x = kb.loadFloat(dtype, buffer, offset);
                       return {kb.select(stays, kb.fadd(acc[0], x), acc[0])};
                     })[0];
      Value mean = kb.select(kb.eq(staying, kb.i32(0)), kb.f32(0),
                             kb.fdiv(sum, kb.uitofp(staying)));
      OpBuilder &b = kb.builder();
      Value narrow = dtype.isF32()
                         ? mean
                         : arith::TruncFOp::create(b, kb.getLoc(), dtype, mean);
      Value bits = kb.bitcast(b.getIntegerType(bytes * 8), narrow);
      kb.forEach(kb.i32(0), kb.i32(flush), [&](Value t) {
        kb.ifThen(
            kb.eq(kb.eq(kb.loadU32(dest, t), kb.i32(kStays)), kb.i1(false)),
            [&] {
              auto [buffer, offset] = element(t);
              kb.store(bits, buffer, kb.mul(kb.toI64(offset), kb.i64(bytes)),
                       bytes);
            });
      });
    });
  });
}

void TrackEmitter::emit() {
  KernelTarget &target = kb.getTarget();
  unsigned candidates = capacity + flush;
  metrics = target.allocShared(kb, candidates * 4);
  positions = target.allocShared(kb, candidates * 4);
  kept = target.allocShared(kb, candidates * 4);
  dest = target.allocShared(kb, flush * 4);
  freed = target.allocShared(kb, capacity * 4);
  control = target.allocShared(kb, 16);
  Value units = kb.divU(args.numTokens, kb.i32(flush));
  kb.forEach(kb.i32(0), units, [&](Value unit) {
    Value unitStart = kb.mul(unit, kb.i32(flush));
    scoreCandidates(unitStart);
    selectCandidates();
    updatePool(unitStart);
    copyEntering(unitStart);
    replaceEntering(unitStart);
  });
}

void kvq::emitTrackKernel(KernelBuilder &kb, const KernelEntry &entry,
                          const CacheLayout &layout) {
  TrackEmitter(kb, entry, layout).emit();
}
