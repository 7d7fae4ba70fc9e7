//===- GPUTarget.cpp - kernels as GPU blocks ------------------------------===//
//
// A block of the target's block_threads threads (#kvq.target): loops are
// strided over the threads and
// end with a barrier, block-local memory is shared memory, and reductions
// combine per-thread partials with warp shuffles, then across warps through
// shared memory.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Layout.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace kvq;

static constexpr unsigned kGlobalSpace = 1;
static constexpr unsigned kSharedSpace = 3;

namespace {

/// mma.sync m16n8k16 with f16 inputs and f32 sums, which every chip from
/// sm_80 runs; its fragments are fed by prmt and lop3.
class MmaUnit : public MatrixUnit {
public:
  SmallVector<Value, 4> multiplyAccumulate(KernelBuilder &kb, ValueRange a,
                                           ValueRange b,
                                           ValueRange c) override {
    OpBuilder &builder = kb.builder();
    Location loc = kb.getLoc();
    Type f32 = builder.getF32Type();
    auto halves = VectorType::get({2}, builder.getF16Type());
    auto asHalves = [&](ValueRange words) {
      SmallVector<Value> out;
      for (Value word : words)
        out.push_back(LLVM::BitcastOp::create(builder, loc, halves, word));
      return out;
    };
    auto resultType = LLVM::LLVMStructType::getLiteral(
        builder.getContext(), SmallVector<Type>(4, f32));
    Value d = NVVM::MmaOp::create(
        builder, loc, resultType, asHalves(a), asHalves(b), c,
        ArrayRef<int64_t>{kM, kN, kK}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::f16, NVVM::MMATypes::f16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value, 4> out;
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(builder, loc, d, i));
    return out;
  }

  Value permuteBytes(KernelBuilder &kb, Value lo, Value hi,
                     Value selector) override {
    return NVVM::PermuteOp::create(kb.builder(), kb.getLoc(),
                                   kb.builder().getI32Type(), lo, hi, selector,
                                   NVVM::PermuteMode::DEFAULT);
  }

  void syncWarp(KernelBuilder &kb) override {
    NVVM::SyncWarpOp::create(kb.builder(), kb.getLoc(), kb.i32(-1));
  }

  /// LLVM selects `and` and `or` for this (ptxas fuses them later); one
  /// lop3 keeps the PTX, which kvq models, at one instruction.
  Value maskOr(KernelBuilder &kb, Value x, Value mask, Value bits) override {
    OpBuilder &b = kb.builder();
    // Constant masks are immediates, not registers set in every iteration.
    bool constantOperands =
        matchPattern(mask, m_Constant()) && matchPattern(bits, m_Constant());
    auto dialect =
        LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT);
    return LLVM::InlineAsmOp::create(
               b, kb.getLoc(), b.getI32Type(), ValueRange{x, mask, bits},
               b.getStringAttr("lop3.b32 $0, $1, $2, $3, 0xEA;"),
               b.getStringAttr(constantOperands ? "=r,r,n,n" : "=r,r,r,r"),
               UnitAttr(), UnitAttr(),
               LLVM::TailCallKindAttr::get(b.getContext(),
                                           LLVM::TailCallKind::None),
               dialect, ArrayAttr())
        .getRes();
  }
};

class GPUTarget : public KernelTarget {
public:
  GPUTarget(gpu::GPUModuleOp module, TargetAttr target)
      : KernelTarget(getGPUTargetInfo(target)), module(module) {
    if (getInfo().matrix == MatrixUnit::getAttr(module.getContext()))
      mma.emplace();
  }

  KernelEntry createKernel(OpBuilder &b, Location loc, StringRef name,
                           ArrayRef<ArgKind> args) override {
    kernelName = name.str();
    numShared = 0;
    Type ptr = getGlobalPtrType(b.getContext());
    SmallVector<Type> types;
    for (ArgKind kind : args)
      types.push_back(kind == ArgKind::I32 ? b.getI32Type() : ptr);
    b.setInsertionPointToEnd(module.getBody());
    auto func =
        gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    // No `known_block_size`: its `.maxntid` makes ptxas cap registers low
    // enough to spill (56 for the InnerQ attend kernel, which needs 64).
    // Read-only, unaliased inputs let NVPTX use the non-coherent cache.
    for (auto [index, kind] : llvm::enumerate(args))
      if (kind == ArgKind::InPtr) {
        func.setArgAttr(index, LLVM::LLVMDialect::getNoAliasAttrName(),
                        b.getUnitAttr());
        func.setArgAttr(index, LLVM::LLVMDialect::getReadonlyAttrName(),
                        b.getUnitAttr());
      }
    b.setInsertionPointToStart(&func.getBody().front());
    KernelEntry kernel;
    kernel.args = SmallVector<Value>(func.getArguments());
    const gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                                   gpu::Dimension::z};
    for (int d = 0; d < 3; ++d)
      kernel.blockId[d] =
          toI32(b, loc, gpu::BlockIdOp::create(b, loc, dims[d]));
    threadId =
        toI32(b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    return kernel;
  }

  void finishKernel(OpBuilder &b, Location loc) override {
    gpu::ReturnOp::create(b, loc);
  }

  Type getGlobalPtrType(MLIRContext *ctx) const override {
    return LLVM::LLVMPointerType::get(ctx, kGlobalSpace);
  }

  void parallelFor(KernelBuilder &kb, Value count,
                   llvm::function_ref<void(Value)> body) override {
    parallelForNoWait(kb, count, body);
    barrier(kb);
  }
  void parallelForNoWait(KernelBuilder &kb, Value count,
                         llvm::function_ref<void(Value)> body) override {
    kb.forLoop(threadId, count, kb.i32(getBlockThreads()), {},
               [&](Value i, ValueRange) {
                 body(i);
                 return SmallVector<Value>();
               });
  }

  Value allocShared(KernelBuilder &kb, uint64_t bytes) override {
    OpBuilder &b = kb.builder();
    std::string name = kernelName + "_shared" + std::to_string(numShared++);
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), bytes);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      LLVM::GlobalOp::create(b, kb.getLoc(), type, /*isConstant=*/false,
                             LLVM::Linkage::Internal, name, Attribute(),
                             /*alignment=*/16, kSharedSpace);
    }
    return LLVM::AddressOfOp::create(
        b, kb.getLoc(),
        LLVM::LLVMPointerType::get(b.getContext(), kSharedSpace), name);
  }

  Value reduce(KernelBuilder &kb, ReduceKind kind, Value ptr,
               Value count) override {
    auto combine = [&](Value x, Value y) {
      return kind == ReduceKind::Sum ? kb.fadd(x, y) : kb.fmax(x, y);
    };
    float identity = kind == ReduceKind::Sum
                         ? 0.0f
                         : -std::numeric_limits<float>::infinity();
    Value partial = kb.forLoop(
        threadId, count, kb.i32(getBlockThreads()), {kb.f32(identity)},
        [&](Value i, ValueRange acc) -> SmallVector<Value> {
          return {combine(acc[0], kb.loadF32(ptr, i))};
        })[0];
    for (unsigned offset = warpSize() / 2; offset > 0; offset /= 2)
      partial = combine(partial, shuffleXor(kb, partial, offset));
    unsigned numWarps = getBlockThreads() / warpSize();
    Value scratch = allocShared(kb, numWarps * 4);
    Value lane = kb.remU(threadId, kb.i32(warpSize()));
    Value warp = kb.divU(threadId, kb.i32(warpSize()));
    kb.ifThen(kb.eq(lane, kb.i32(0)),
              [&] { kb.storeF32(partial, scratch, warp); });
    barrier(kb);
    Value result = kb.loadF32(scratch, kb.i32(0));
    for (unsigned w = 1; w < numWarps; ++w)
      result = combine(result, kb.loadF32(scratch, kb.i32(w)));
    return result;
  }

  void accumulate(KernelBuilder &kb, Value lanes, unsigned maxLanes,
                  unsigned numSums, unsigned /*unroll*/,
                  ArrayRef<std::pair<IndexRange, AccumulateStep>> steps,
                  function_ref<void(Value, ValueRange)> finish) override {
    parallelFor(kb, lanes, [&](Value lane) {
      SmallVector<Value> sums(numSums, kb.f32(0));
      for (auto [range, step] : steps)
        sums = kb.forLoop(range.begin, range.end, kb.i32(1), sums,
                          [&](Value index, ValueRange current) {
                            return step(index, lane, current);
                          });
      finish(lane, sums);
    });
  }

  /// CUDA's threadfence pattern (cooperative groups' grid barrier arrives
  /// the same way): after a barrier, thread 0 fences at device scope, which
  /// is cumulative over the block's writes the barrier ordered before it,
  /// and counts the block; in the last block it fences again to acquire
  /// the others' writes. The verdict reaches the block through shared
  /// memory.
  Value arriveLast(KernelBuilder &kb, Value counter, Value count) override {
    Value verdict = allocShared(kb, 4);
    barrier(kb);
    kb.ifThen(kb.eq(threadId, kb.i32(0)), [&] {
      deviceFence(kb);
      Value arrived = kb.atomicAddU32(counter, kb.i64(0), kb.i32(1));
      Value last = kb.eq(arrived, kb.sub(count, kb.i32(1)));
      kb.ifThen(last, [&] {
        deviceFence(kb);
        kb.store(kb.i32(0), counter, kb.i64(0), 4);
      });
      kb.store(arith::ExtUIOp::create(kb.builder(), kb.getLoc(),
                                      kb.builder().getI32Type(), last),
               verdict, kb.i64(0), 4);
    });
    barrier(kb);
    return kb.eq(kb.loadU32(verdict, kb.i32(0)), kb.i32(1));
  }

  bool prefetchesSplits() const override { return true; }
  /// `prefetch.global.L2` as inline PTX: LLVM selects its prefetch
  /// intrinsics from sm_90 and PTX 8.0 only, and the oldest chip's PTX
  /// (sm_80, ISA 7.0) must carry it too.
  void prefetchLine(KernelBuilder &kb, Value address) override {
    OpBuilder &b = kb.builder();
    LLVM::InlineAsmOp::create(
        b, kb.getLoc(), Type(), ValueRange{address}, "prefetch.global.L2 [$0];",
        "l", /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None,
        LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
        ArrayAttr());
  }

  /// Timed on an H200 (docs/Performance.md, "GPU: measured on an H200"): the
  /// fp16 attention's row loops, 4 iterations at a time, run 15-20% faster
  /// than one at a time (2: 10-12%). The matrix forms' loops are left one
  /// at a time: unrolled, KIVI-2 gained nothing and InnerQ-base lost 6%.
  unsigned getSplitTokens(const CacheLayout &layout) const override {
    return layout.splitTokens;
  }
  MatrixUnit *getMatrixUnit() override { return mma ? &*mma : nullptr; }

  /// A butterfly of xor shuffles over the whole warp (every lane takes
  /// part; offsets below `workers` stay inside each group).
  SmallVector<Value> reduceAcrossWorkers(KernelBuilder &kb, ReduceKind kind,
                                         ValueRange values,
                                         unsigned workers) override {
    SmallVector<Value> results(values.begin(), values.end());
    for (unsigned offset = workers / 2; offset > 0; offset /= 2)
      for (Value &result : results) {
        Value other = shuffleXor(kb, result, offset);
        result = kind == ReduceKind::Sum ? kb.fadd(result, other)
                                         : kb.fmax(result, other);
      }
    return results;
  }

  /// `ex2.approx.f32`: 2 ulp (PTX ISA), plenty for softmax weights.
  Value exp2(KernelBuilder &kb, Value x) override {
    return kb.callIntrinsic("llvm.exp2", x);
  }

  Value getConstantTable(KernelBuilder &kb, StringRef name,
                         ArrayRef<int32_t> values) override {
    // Global, not constant, memory: the 64 KiB constant bank would cap the
    // tables of a whole model.
    return kb.getGlobalTable(module, kernelName + "_" + name.str(), values,
                             kGlobalSpace);
  }

private:
  /// `value` of the lane `offset` away by xor; vectors lane by lane.
  Value shuffleXor(KernelBuilder &kb, Value value, unsigned offset) {
    auto shuffle = [&](Value scalar) -> Value {
      return gpu::ShuffleOp::create(kb.builder(), kb.getLoc(), scalar,
                                    kb.i32(offset), kb.i32(warpSize()),
                                    gpu::ShuffleMode::XOR)
          .getShuffleResult();
    };
    auto type = dyn_cast<VectorType>(value.getType());
    if (!type)
      return shuffle(value);
    SmallVector<Value> lanes;
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      lanes.push_back(shuffle(vector::ExtractOp::create(
          kb.builder(), kb.getLoc(), value, ArrayRef<int64_t>{i})));
    return vector::FromElementsOp::create(kb.builder(), kb.getLoc(), type,
                                          lanes);
  }
  static Value toI32(OpBuilder &b, Location loc, Value index) {
    return arith::IndexCastUIOp::create(b, loc, b.getI32Type(), index);
  }
  void barrier(KernelBuilder &kb) {
    gpu::BarrierOp::create(kb.builder(), kb.getLoc());
  }
  /// fence.acq_rel.gpu
  void deviceFence(KernelBuilder &kb) {
    LLVM::FenceOp::create(kb.builder(), kb.getLoc(),
                          LLVM::AtomicOrdering::acq_rel, "device");
  }

  gpu::GPUModuleOp module;
  /// A warp: TargetInfo's workers.
  unsigned warpSize() const { return getMaxWorkers(); }
  std::string kernelName;
  unsigned numShared = 0;
  Value threadId;
  std::optional<MmaUnit> mma;
};

} // namespace

TargetInfo kvq::getGPUTargetInfo(TargetAttr target) {
  TargetInfo info;
  info.blockThreads = target.getBlockThreads();
  info.maxWorkers = target.getWarpSize();
  // A thread's vectors: 8 f32 registers, so that the quantized attention
  // loops keep 4 of them per thread as accumulators (32 registers) beside
  // codes, weights and addresses, with no spills.
  info.vectorLanes = 8;
  info.vectorRegisters = 8;
  info.loadsInFlight = 4;
  // 8 deep, the attend program's rows of 16 bytes wait as often as the
  // emitted kernel's whole rows (4 deep: twice as often, its model 19%
  // slower at batch 1, 4k).
  info.expandedLoadsInFlight = 8;
  // A quarter of the 255 a thread may have. With no cap, fp16's attend
  // kept a loop of 256 bytes an iteration four deep: 255 registers and 944
  // bytes of spills on sm_90 (159 registers and none with the cap).
  info.loadRegisters = 64;
  info.loadBytes = 16;
  info.minMaxNum = true;
  info.matrix = target.getGpuMatrix();
  return info;
}

std::unique_ptr<KernelTarget> kvq::createGPUTarget(gpu::GPUModuleOp module,
                                                   TargetAttr target) {
  return std::make_unique<GPUTarget>(module, target);
}
