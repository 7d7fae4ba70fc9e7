//===- IntegerDots.cpp - a row reduction on integer dots ------------------===//
//
// The form of a reduction `sum_c a_r(c) * dequantize(code(c))` over a
// row's channels whose lanes are rows (Vectorizer.h, IntegerDotPlan) on a
// host with integer dots (docs/Numerics.md, "Attention on integer dots",
// span=tokens keys): per vector iteration, each head's factors times the
// channels' slopes are rounded to the dots' integers (i16 or i8) against
// their largest magnitude; then per k channels (2 or 4), each lane's k
// codes are one i32 (the first channel's in the lowest part) dotted with
// the head's k rounded factors by one `vpdpwssd` or `vpdpbusd`; the exact
// i32 sums go to f32 times the head's scale, plus the factors' sum with
// the channels' offsets.
//
//===----------------------------------------------------------------------===//

#include "ExactIndex.h"
#include "ParallelForms.h"
#include "Vectorizer.h"

#include "kvq/Codegen/CodePacking.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Quantizer.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace kvq;

std::pair<Value, Value> kvq::allocateRoundedFactors(OpBuilder &b, Operation *op,
                                                    IntegerDots dots,
                                                    int64_t elements) {
  OpBuilder::InsertionGuard guard(b);
  auto function = op->getParentOfType<FunctionOpInterface>();
  b.setInsertionPointToStart(&function.getFunctionBody().front());
  Location loc = op->getLoc();
  Value bytes = memref::AllocaOp::create(
      b, loc, MemRefType::get({elements * dots.bits / 8}, b.getI8Type()),
      ValueRange(), b.getI64IntegerAttr(64));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value rounded = memref::ViewOp::create(
      b, loc, MemRefType::get({elements}, b.getIntegerType(dots.bits)), bytes,
      zero, ValueRange());
  Value packs = memref::ViewOp::create(
      b, loc, MemRefType::get({elements / dots.k}, b.getI32Type()), bytes, zero,
      ValueRange());
  return {rounded, packs};
}

std::optional<DotTerms> Vectorizer::matchDotTerms(scf::ParallelOp reduction,
                                                  IntegerDots dots) const {
  Block *body = reduction.getBody();
  auto reduce = cast<scf::ReduceOp>(body->getTerminator());
  DequantizeOp dequantize;
  SmallVector<Value> factors;
  for (auto [k, value] : llvm::enumerate(reduce.getOperands())) {
    Block &combiner = reduce.getReductions()[k].front();
    if (combiner.getOperations().size() != 2 ||
        !isa<arith::AddFOp>(combiner.front()) ||
        !matchPattern(reduction.getInitVals()[k], m_PosZeroFloat()))
      return std::nullopt;
    auto product = value.getDefiningOp<arith::MulFOp>();
    if (!product || product->getBlock() != body)
      return std::nullopt;
    Value x = product.getLhs(), factor = product.getRhs();
    if (!x.getDefiningOp<DequantizeOp>())
      std::swap(x, factor);
    auto term = x.getDefiningOp<DequantizeOp>();
    if (!term || (dequantize && term != dequantize) || varying.contains(factor))
      return std::nullopt;
    dequantize = term;
    factors.push_back(factor);
  }
  if (!dequantize || !varying.contains(dequantize.getCode()) ||
      varying.contains(dequantize.getScale()) ||
      varying.contains(dequantize.getZero()))
    return std::nullopt;
  return DotTerms{reduction, dequantize, factors, dots};
}

std::optional<IntegerDotPlan>
Vectorizer::matchIntegerDots(scf::ParallelOp reduction,
                             IntegerDots dots) const {
  std::optional<int64_t> channels =
      getParallelTripCount(reduction, /*withReductions=*/true);
  if (!channels || *channels % dots.k != 0 || lanes != 16)
    return std::nullopt;
  std::optional<DotTerms> terms = matchDotTerms(reduction, dots);
  if (!terms ||
      !dots.sumsFit(
          *channels,
          cast<DequantizeOp>(terms->dequantize).getScheme().getBits()))
    return std::nullopt;
  // The body computes the sums and nothing else.
  for (Operation &op : reduction.getBody()->without_terminator())
    if (!isPure(&op) && !isa<memref::LoadOp>(op))
      return std::nullopt;
  return IntegerDotPlan{*terms, *channels, {}, {}, {}, {}};
}

std::optional<IntegerDotPlan::CodeWords>
Vectorizer::matchCodeWords(const IntegerDotPlan &plan, unsigned chunks) const {
  auto dequantize = cast<DequantizeOp>(plan.dequantize);
  unsigned bits = dequantize.getScheme().getBits();
  arith::ShRUIOp shifted = matchShiftedWord(dequantize.getCode(), bits);
  auto load = shifted ? shifted.getLhs().getDefiningOp<memref::LoadOp>()
                      : memref::LoadOp();
  if (plan.dots.k != 2 || !load || load.getIndices().size() != 1 ||
      !load.getMemRefType().isLastDimUnitStride() ||
      varying.contains(load.getMemRef()) ||
      varying.contains(load.getIndices()[0]))
    return std::nullopt;
  // Lane l of chunk c at channel + part: each lane's word among those from
  // the first's, its shift exactly known, the memref the same in each.
  scf::ParallelOp reduction = plan.reduction;
  Value channel = reduction.getInductionVars()[0];
  Value index = load.getIndices()[0];
  auto laneAt = [&](unsigned c, unsigned l,
                    unsigned part) -> std::optional<ExactLane> {
    std::optional<ExactLane> lane =
        getExactLane(chunks, int64_t(c) * lanes + l);
    if (lane) {
      lane->known.push_back(
          {channel, ExactIndex{0, int64_t(part), {{channel, 1, 1}}}});
      lane->ivs.push_back(channel);
    }
    return lane;
  };
  std::optional<ExactLane> origin = laneAt(0, 0, 0);
  std::optional<ExactIndex> first =
      origin ? getExactIndex(index, *origin) : std::nullopt;
  if (!first)
    return std::nullopt;
  IntegerDotPlan::CodeWords row{load, 0, {}};
  SmallVector<ExactLane> places;
  for (unsigned c = 0; c < chunks; ++c) {
    SmallVector<unsigned> &halfBits = row.halfBits.emplace_back();
    for (unsigned l = 0; l < lanes; ++l)
      for (unsigned part = 0; part < plan.dots.k; ++part) {
        std::optional<ExactLane> lane = laneAt(c, l, part);
        std::optional<ExactIndex> word = getExactIndex(index, *lane);
        std::optional<ExactIndex> shift =
            getExactIndex(shifted.getRhs(), *lane);
        if (!word || !word->sameUnknowns(*first) || !shift ||
            !shift->isConstant())
          return std::nullopt;
        int64_t place = word->offset - first->offset;
        if (place < 0 || place >= lanes || shift->offset < 0 ||
            shift->offset + bits > 32)
          return std::nullopt;
        row.words = std::max(row.words, place + 1);
        halfBits.push_back(32 * place + shift->offset);
        if (l == 0)
          places.push_back(std::move(*lane));
      }
  }
  if (!isSameAt(load.getMemRef(), places))
    return std::nullopt;
  return row;
}

void Vectorizer::widenIntegerDots(OpBuilder &b,
                                  MutableArrayRef<LaneChunk> chunks) {
  IntegerDotPlan &plan = *integerDots;
  scf::ParallelOp reduction = plan.reduction;
  auto dequantize = cast<DequantizeOp>(plan.dequantize);
  Location loc = reduction.getLoc();
  ProgramBuilder pb(b, loc);
  Block *body = reduction.getBody();
  Value channel = reduction.getInductionVars()[0];
  unsigned heads = plan.factors.size();
  int64_t dim = plan.channels;
  SmallVector<Value> foldedRows, roundedRows;
  for (unsigned r = 0; r < heads; ++r) {
    foldedRows.push_back(pb.row(plan.folded, pb.index(r * dim), dim));
    roundedRows.push_back(pb.row(plan.rounded, pb.index(r * dim), dim));
  }
  // Per channel, in any order: each head's factor times the slope, stored;
  // its largest magnitude; the factors' sum with the offsets.
  SmallVector<Value> roots = {dequantize.getScale(), dequantize.getZero()};
  roots.append(plan.factors);
  SmallVector<Operation *> params = getSliceInBlock(body, roots);
  Quantizer quantizer(pb, dequantize.getScheme());
  SmallVector<Value> inits(2 * heads, pb.f32(0));
  scf::ParallelOp folds = pb.parallelReduce(
      pb.index(dim), inits,
      [&](Value c) {
        // The parameters the lanes share: the first chunk's, from its first
        // lane's scalars.
        LaneChunk &first = chunks.front();
        IRMapping mapping = first.mapping;
        for (auto [value, scalar] : first.firstLanes.getValueMap())
          mapping.map(value, scalar);
        mapping.map(channel, c);
        for (Operation *op : params)
          b.clone(*op, mapping);
        AffineTerms terms =
            quantizer.affine(mapping.lookupOrDefault(dequantize.getScale()),
                             mapping.lookupOrDefault(dequantize.getZero()));
        SmallVector<Value> offsets, largest;
        for (unsigned r = 0; r < heads; ++r) {
          Value factor = mapping.lookupOrDefault(plan.factors[r]);
          Value folded = pb.fmul(factor, terms.slope);
          pb.storeElement(folded, foldedRows[r], c);
          offsets.push_back(pb.fmul(factor, terms.offset));
          largest.push_back(pb.fabs(folded));
        }
        offsets.append(largest);
        return offsets;
      },
      [&](unsigned k, Value x, Value y) {
        return k < heads ? pb.fadd(x, y) : pb.selectMax(x, y);
      });
  // Each head's factors rounded against the largest.
  IntegerDots dots = plan.dots;
  SmallVector<Value> toFactors, scales;
  for (unsigned r = 0; r < heads; ++r) {
    Value largest = folds.getResult(heads + r);
    toFactors.push_back(dots.scaleToFactors(pb, largest));
    scales.push_back(pb.fmul(largest, pb.f32(1 / dots.getFactorMax())));
  }
  pb.parallelFor(dim, [&](Value c) {
    for (unsigned r = 0; r < heads; ++r)
      pb.storeElement(
          dots.round(pb, pb.loadElement(foldedRows[r], c), toFactors[r]),
          roundedRows[r], c);
  });
  // Per k channels, each chunk's lanes' k codes against each head's k
  // rounded factors.
  SmallVector<Operation *> codes = getSliceInBlock(body, dequantize.getCode());
  Type laneType = VectorType::get({int64_t(lanes)}, b.getI32Type());
  SmallVector<Value> sumInits(chunks.size() * heads,
                              pb.splat(pb.i32(0), lanes));
  auto packs = scf::ForOp::create(
      b, loc, pb.index(0), pb.index(dim), pb.index(dots.k), sumInits,
      [&](OpBuilder &, Location, Value c, ValueRange acc) {
        auto codesAt = [&](LaneChunk chunk, Value at) {
          chunk.mapping.map(channel, at);
          for (Operation *op : codes)
            widenOp(*op, b, chunk);
          return asVector(b, loc,
                          chunk.mapping.lookupOrDefault(dequantize.getCode()));
        };
        SmallVector<Value> factorPacks;
        for (unsigned r = 0; r < heads; ++r) {
          Value at = arith::DivUIOp::create(
              b, loc, arith::AddIOp::create(b, loc, pb.index(r * dim), c),
              pb.index(dots.k));
          factorPacks.push_back(vector::BroadcastOp::create(
              b, loc, laneType, pb.loadElement(plan.roundedPacks, at)));
        }
        // Each chunk's k codes a lane: one vector load of their words for
        // all the chunks where they are CodeWords, else each channel's
        // codes shifted into their place.
        auto codesOfChannels = [&](LaneChunk &chunk) {
          Value pack = codesAt(chunk, c);
          for (unsigned part = 1; part < dots.k; ++part) {
            Value at = arith::AddIOp::create(b, loc, c, pb.index(part));
            pack = pb.bitOr(pack,
                            pb.shl(codesAt(chunk, at),
                                   pb.splat(pb.i32(part * dots.bits), lanes)));
          }
          return pack;
        };
        SmallVector<Value> wordPacks;
        if (plan.codeWords)
          wordPacks = packCodeWords(b, chunks, c);
        SmallVector<Value> sums;
        for (auto [k, chunk] : llvm::enumerate(chunks)) {
          Value pack = plan.codeWords ? wordPacks[k] : codesOfChannels(chunk);
          for (unsigned r = 0; r < heads; ++r)
            sums.push_back(
                dots.dot(pb, acc[k * heads + r], pack, factorPacks[r]));
        }
        scf::YieldOp::create(b, loc, sums);
      });
  for (auto [k, chunk] : llvm::enumerate(chunks))
    for (unsigned r = 0; r < heads; ++r) {
      Value sum = pb.sitofp(packs.getResult(k * heads + r));
      chunk.mapping.map(reduction.getResult(r),
                        pb.fadd(pb.fmul(sum, pb.splat(scales[r], lanes)),
                                pb.splat(folds.getResult(r), lanes)));
    }
}

SmallVector<Value> Vectorizer::packCodeWords(OpBuilder &b,
                                             MutableArrayRef<LaneChunk> chunks,
                                             Value channel) {
  IntegerDotPlan &plan = *integerDots;
  IntegerDotPlan::CodeWords &row = *plan.codeWords;
  Location loc = plan.reduction.getLoc();
  ProgramBuilder pb(b, loc);
  // The first chunk's memref and index of its first channel's word.
  LaneChunk first = chunks.front();
  first.mapping.map(plan.reduction.getInductionVars()[0], channel);
  Value memref = row.load.getMemRef(), index = row.load.getIndices()[0];
  for (Operation *op :
       getSliceInBlock(plan.reduction.getBody(), ValueRange{memref, index}))
    widenOp(*op, b, first);
  Value words = vector::LoadOp::create(
      b, loc, VectorType::get({row.words}, b.getI32Type()),
      first.mapping.lookupOrDefault(memref),
      first.mapping.lookupOrDefault(index));
  Value bytes = vector::BitCastOp::create(
      b, loc, VectorType::get({4 * row.words}, b.getI8Type()), words);
  unsigned bits = cast<DequantizeOp>(plan.dequantize).getScheme().getBits();
  SmallVector<Value> packs;
  for (unsigned c = 0; c < chunks.size(); ++c)
    packs.push_back(unpackHalves(pb, bytes, bits, row.halfBits[c]));
  return packs;
}
