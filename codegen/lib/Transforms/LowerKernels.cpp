//===- LowerKernels.cpp - kernel declarations to block programs -----------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kvq {
#define GEN_PASS_DEF_KVQLOWERKERNELS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

/// Where the kernels of one cache go: its layout, its host module and GPU
/// module, a target emitting into each, and the module of the kernels built
/// as one program for both.
struct CacheKernels {
  CacheLayout layout;
  ModuleOp host;
  gpu::GPUModuleOp device;
  std::unique_ptr<KernelTarget> cpu, gpu;
  ModuleOp program;
};

using CacheKernelsMap = llvm::DenseMap<Operation *, CacheKernels>;

/// A pattern replacing kernel ops of one kind, with the modules of every
/// cache.
template <typename KernelOpT>
struct KernelOpPattern : OpRewritePattern<KernelOpT> {
  KernelOpPattern(MLIRContext *ctx, CacheKernelsMap &caches,
                  PatternBenefit benefit = 1)
      : OpRewritePattern<KernelOpT>(ctx, benefit), caches(caches) {}

  /// Where the kernels of `op`'s cache go; null where its layout is not
  /// known.
  CacheKernels *getKernels(KernelOpT op) const {
    auto cache = caches.find(op.getCacheOp());
    return cache == caches.end() ? nullptr : &cache->second;
  }

  CacheKernelsMap &caches;
};

/// Replace a kernel op by its block program, emitted for both targets, each
/// function tagged with what the manifest needs from the op.
template <typename KernelOpT>
struct LowerKernelOp : KernelOpPattern<KernelOpT> {
  using KernelOpPattern<KernelOpT>::KernelOpPattern;

  LogicalResult matchAndRewrite(KernelOpT op,
                                PatternRewriter &rewriter) const override {
    CacheKernels *found = this->getKernels(op);
    if (!found)
      return rewriter.notifyMatchFailure(op, "no layout for its cache");
    CacheKernels &kernels = *found;
    KernelSpec spec = getKernelSpec(op);
    NamedAttribute tag = getLoweredKernelAttr(op);
    for (auto [target, container] : {std::pair<KernelTarget *, Operation *>{
                                         kernels.cpu.get(), kernels.host},
                                     {kernels.gpu.get(), kernels.device}}) {
      if (auto attend = dyn_cast<AttendKernelOp>(op.getOperation())) {
        spec.forms = target == kernels.gpu.get() ? attend.getGpuFormsAttr()
                                                 : attend.getCpuFormsAttr();
        if (!spec.forms)
          return op.emitOpError("has no forms for ")
                 << (target == kernels.gpu.get() ? "the GPU" : "the CPU")
                 << ": run kvq-select-forms first";
      }
      emitKernel(spec, kernels.layout, *target, rewriter, op.getLoc());
      SymbolTable::lookupSymbolIn(container, spec.name)
          ->setAttr(tag.getName(), tag.getValue());
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Builds a kernel program.
using ProgramBuilderFn = void (*)(OpBuilder &, Location, const KernelSpec &,
                                  const CacheLayout &);
/// Whether a kernel is built as a program.
using ProgramFilterFn = bool (*)(const KernelSpec &, const CacheLayout &);

bool isAlwaysProgram(const KernelSpec &, const CacheLayout &) { return true; }

/// Replace a kernel op by its program, built by `Build` and tagged like the
/// emitted kernels, where `Filter` says it is one. It comes before the
/// emitting pattern of its kind (benefit 2).
template <typename KernelOpT, ProgramBuilderFn Build,
          ProgramFilterFn Filter = isAlwaysProgram>
struct BuildKernelProgram : KernelOpPattern<KernelOpT> {
  BuildKernelProgram(MLIRContext *ctx, CacheKernelsMap &caches)
      : KernelOpPattern<KernelOpT>(ctx, caches, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(KernelOpT op,
                                PatternRewriter &rewriter) const override {
    CacheKernels *kernels = this->getKernels(op);
    if (!kernels)
      return rewriter.notifyMatchFailure(op, "no layout for its cache");
    KernelSpec spec = getKernelSpec(op);
    if (!Filter(spec, kernels->layout))
      return rewriter.notifyMatchFailure(op, "emitted, not a program");
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToEnd(kernels->program.getBody());
      Build(rewriter, op.getLoc(), spec, kernels->layout);
    }
    NamedAttribute tag = getLoweredKernelAttr(op);
    SymbolTable::lookupSymbolIn(kernels->program, spec.name)
        ->setAttr(tag.getName(), tag.getValue());
    rewriter.eraseOp(op);
    return success();
  }
};

/// The cache a kernel op serves; null for any other op.
CacheOp getKernelCache(Operation *op) {
  return llvm::TypeSwitch<Operation *, CacheOp>(op)
      .Case<FlushKernelOp, KeyNormKernelOp, TrackKernelOp, AttendKernelOp>(
          [](auto kernel) { return kernel.getCacheOp(); })
      .Default([](Operation *) { return CacheOp(); });
}

bool isKernelOp(Operation *op) {
  return isa<FlushKernelOp, KeyNormKernelOp, TrackKernelOp, AttendKernelOp>(op);
}

/// Creates the empty host and GPU modules of `cache` at the end of `module`.
/// Fails (with a diagnostic) where their names are taken: the artifact
/// writer finds them by name.
FailureOr<CacheKernels> createCacheModules(ModuleOp module, CacheOp cache,
                                           CacheLayout layout) {
  std::string hostName = getHostModuleName(cache);
  std::string deviceName = getDeviceModuleName(cache);
  std::string programName = getProgramModuleName(cache);
  for (StringRef name :
       {StringRef(hostName), StringRef(deviceName), StringRef(programName)})
    if (SymbolTable::lookupSymbolIn(module, name))
      return cache.emitOpError("kvq-lower-kernels needs the symbol @")
             << name << " for its kernels, but it is taken";
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = cache.getLoc();
  CacheKernels kernels{std::move(layout)};
  kernels.host = ModuleOp::create(b, loc, hostName);
  kernels.host->setAttr("kvq.cache", FlatSymbolRefAttr::get(cache));
  TargetAttr target = getCacheTarget(cache);
  kernels.host->setAttr("kvq.host_cpu", b.getStringAttr(target.getHostCpu()));
  kernels.device = gpu::GPUModuleOp::create(b, loc, deviceName);
  kernels.device->setAttr("kvq.cache", FlatSymbolRefAttr::get(cache));
  kernels.cpu = createCPUTarget(kernels.host, target);
  kernels.gpu = createGPUTarget(kernels.device, target);
  kernels.program = ModuleOp::create(b, loc, programName);
  kernels.program->setAttr("kvq.cache", FlatSymbolRefAttr::get(cache));
  kernels.program->setAttr("kvq.program", b.getUnitAttr());
  return kernels;
}

/// The modules and layout of every cache a kernel op names, or failure
/// (with a diagnostic) if one cannot be computed: a kernel op is never left
/// behind silently.
FailureOr<CacheKernelsMap> createCacheKernels(ModuleOp module) {
  CacheKernelsMap caches;
  WalkResult result = module.walk([&](Operation *op) {
    if (!isKernelOp(op))
      return WalkResult::advance();
    CacheOp cache = getKernelCache(op);
    if (!cache) {
      op->emitError("kernel names no kvq.cache");
      return WalkResult::interrupt();
    }
    if (caches.count(cache))
      return WalkResult::advance();
    FailureOr<CacheLayout> layout = getCacheLayout(cache);
    if (failed(layout))
      return WalkResult::interrupt();
    FailureOr<CacheKernels> kernels =
        createCacheModules(module, cache, std::move(*layout));
    if (failed(kernels))
      return WalkResult::interrupt();
    caches.try_emplace(cache, std::move(*kernels));
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  return caches;
}

struct KVQLowerKernelsPass
    : kvq::impl::KVQLowerKernelsBase<KVQLowerKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<CacheKernelsMap> caches = createCacheKernels(module);
    if (failed(caches))
      return signalPassFailure();
    if (!caches->empty())
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      UnitAttr::get(&getContext()));
    RewritePatternSet patterns(&getContext());
    patterns.add<BuildKernelProgram<FlushKernelOp, buildFlushProgram>,
                 BuildKernelProgram<KeyNormKernelOp, buildKeyNormProgram>,
                 BuildKernelProgram<TrackKernelOp, buildTrackProgram>,
                 LowerKernelOp<AttendKernelOp>>(&getContext(), *caches);
    if (attendPrograms)
      patterns.add<BuildKernelProgram<AttendKernelOp, buildAttendProgram,
                                      isAttendProgram>>(&getContext(), *caches);
    if (quantizedAttendPrograms)
      patterns.add<BuildKernelProgram<AttendKernelOp, buildAttendProgram,
                                      isQuantizedAttendProgram>>(&getContext(),
                                                                 *caches);
    // One in-order sweep: kernels are emitted in declaration order.
    walkAndApplyPatterns(module, std::move(patterns));
    WalkResult left = module.walk([](Operation *op) {
      if (!isKernelOp(op))
        return WalkResult::advance();
      op->emitError("kvq-lower-kernels could not lower this kernel");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
