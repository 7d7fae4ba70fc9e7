//===- GPUPipeline.cpp - kernel IR to PTX ---------------------------------===//
//
// gpu.module -> (scf-to-cf, gpu-to-nvvm) -> NVVM/LLVM -> NVPTX -> PTX text,
// one object per chip. No CUDA toolkit is needed: the kernels call no
// libdevice function (exp2, sqrt, roundeven are LLVM intrinsics).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace kvq;

FailureOr<SmallVector<std::string>>
kvq::compileToPTX(ModuleOp module, ArrayRef<std::string> chips) {
  MLIRContext *ctx = module.getContext();
  SmallVector<Attribute> targets;
  for (const std::string &chip : chips)
    targets.push_back(NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3,
                                                "nvptx64-nvidia-cuda", chip));
  module.walk([&](gpu::GPUModuleOp gpuModule) {
    gpuModule.setTargetsAttr(ArrayAttr::get(ctx, targets));
  });

  PassManager pm(ctx);
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createSCFToControlFlowPass());
  gpuPm.addPass(createConvertGpuOpsToNVVMOps());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(pm.run(module)))
    return failure();

  SmallVector<std::string> ptx;
  module.walk([&](gpu::BinaryOp binaryOp) {
    for (Attribute object : binaryOp.getObjects())
      ptx.push_back(cast<gpu::ObjectAttr>(object).getObject().str());
  });
  if (ptx.size() != chips.size())
    return module.emitError("expected one PTX object per chip, got ")
           << ptx.size();
  return ptx;
}
