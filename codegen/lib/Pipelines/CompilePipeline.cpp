//===- CompilePipeline.cpp - kvq-compile-pipeline and its stages ----------===//
//
// Ordinary passes only: each stage runs, prints (--mlir-print-ir-after-all)
// and times (--mlir-timing) like any mlir-opt pipeline. Writing files and
// calling the system compiler is the artifact writer's job, after these.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Pipelines.h"
#include "kvq/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace kvq;

SmallVector<std::string> KVQCompilePipelineOptions::getChips() const {
  if (chips.empty())
    return SmallVector<std::string>(std::begin(kDefaultChips),
                                    std::end(kDefaultChips));
  return llvm::to_vector(chips);
}

void kvq::buildKVQKernelsPipeline(OpPassManager &pm,
                                  const KVQCompilePipelineOptions &options) {
  KVQAssignTargetOptions target;
  target.hostCpu = options.hostCpu;
  target.chips = options.getChips();
  target.dotFactorBits = options.dotFactorBits;
  pm.addPass(createKVQAssignTarget(target));
  pm.nest<CacheOp>().addPass(createKVQExpandSchedule());
  pm.addPass(createKVQAssignLayout());
  pm.addPass(createKVQPlanKernels());
  pm.addPass(createKVQSelectForms());
  KVQLowerKernelsOptions lower;
  lower.attendPrograms = options.attendPrograms;
  lower.quantizedAttendPrograms = options.quantizedAttendPrograms;
  pm.addPass(createKVQLowerKernels(lower));
  pm.addPass(createKVQInstantiatePrograms());
  pm.addPass(createKVQExpandGroupDots());
  pm.addPass(createKVQExpandHadamard());
  pm.addPass(createKVQRunningExtrema());
  pm.addPass(createKVQVectorizeParallel());
  pm.addPass(createKVQDistributeParallel());
  pm.addPass(createKVQExpandMath());
  pm.addPass(createKVQPipelineLoads());
  pm.addPass(createKVQExpandDequantize());
  pm.addPass(createKVQExpandUnpack());
  pm.addPass(createKVQExpandPack());
  // Each cache's GPU module gets the NVVM target of its kvq.target's PTX
  // chip here, not in the GPU stage, so that the host and GPU stages that
  // follow are adjacent nested pipelines: the pass manager then runs the
  // host module's and the GPU module's lowering side by side.
  pm.addPass(createKVQAttachNVVMTargets());
}

void kvq::buildKVQHostToLLVMPipeline(OpPassManager &pm) {
  OpPassManager &host = pm.nest<ModuleOp>();
  // The passes that rewrite inside a function run on each kernel apart, so
  // the pass manager spreads a module's kernels over the context's threads.
  OpPassManager &kernel = host.nestAny();
  // Kernel programs' row views: subviews to offsets on their buffers.
  kernel.addPass(memref::createExpandStridedMetadataPass());
  kernel.addPass(createSCFToControlFlowPass());
  // bf16 rounding as integer arithmetic: no libgcc soft-float helper needed.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  kernel.addPass(arith::createArithExpandOpsPass(expand));
  host.addPass(createConvertToLLVMPass());
  host.addPass(createReconcileUnrealizedCastsPass());
  host.addPass(createKVQMoveBF16AsBits());
}

void kvq::buildKVQGPUToBinaryPipeline(OpPassManager &pm) {
  // GPU-to-NVVM converts the kernel programs' memref loads and stores too
  // (through memref's ConvertToLLVM interface), so no module-level
  // finalize-memref-to-llvm splits this nested pipeline in two.
  OpPassManager &toNVVM = pm.nest<gpu::GPUModuleOp>();
  // Kernel by kernel on the context's threads, as in the host stage; only
  // the conversion, which declares the module's intrinsics, sees it whole.
  OpPassManager &kernel = toNVVM.nestAny();
  kernel.addPass(memref::createExpandStridedMetadataPass());
  kernel.addPass(createSCFToControlFlowPass());
  // The matrix forms' nvgpu.mma.sync, as nvvm.mma.sync.
  kernel.addPass(createConvertNVGPUToNVVMPass());
  toNVVM.addPass(createConvertGpuOpsToNVVMOps());
  OpPassManager &nvvmKernel = toNVVM.nestAny();
  nvvmKernel.addPass(createCanonicalizerPass());
  nvvmKernel.addPass(createCSEPass());
  toNVVM.addPass(createReconcileUnrealizedCastsPass());
  // One PTX per cache, for the NVVM target kvq-build-kernels attached.
  pm.addPass(createKVQGpuModuleToBinary());
}

void kvq::buildKVQCompilePipeline(OpPassManager &pm,
                                  const KVQCompilePipelineOptions &options) {
  buildKVQKernelsPipeline(pm, options);
  buildKVQHostToLLVMPipeline(pm);
  buildKVQGPUToBinaryPipeline(pm);
}

void kvq::registerKVQCompilePipelines() {
  PassPipelineRegistration<KVQCompilePipelineOptions>(
      "kvq-compile-pipeline",
      "Lower kvq.cache specs to LLVM-dialect host modules and PTX binaries, "
      "ready for the artifact writer",
      buildKVQCompilePipeline);
  PassPipelineRegistration<KVQCompilePipelineOptions>(
      "kvq-build-kernels",
      "Stage 1: attach the target, expand schedules, plan the kernels of "
      "every kvq.cache, select their forms and lower them to host functions "
      "and GPU kernels, and give the GPU modules their NVVM target",
      buildKVQKernelsPipeline);
  PassPipelineRegistration<>(
      "kvq-host-to-llvm", "Stage 2: lower the host modules to the LLVM dialect",
      buildKVQHostToLLVMPipeline);
  PassPipelineRegistration<>(
      "kvq-gpu-to-binary",
      "Stage 3: lower the GPU modules through NVVM to one PTX each, for the "
      "oldest chip of each cache's kvq.target, which every chip loads",
      buildKVQGPUToBinaryPipeline);
}
