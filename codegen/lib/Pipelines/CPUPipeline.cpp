//===- CPUPipeline.cpp - kernel IR to host object code --------------------===//
//
// func/scf/arith/llvm -> LLVM dialect -> LLVM IR -> O3 for the host CPU ->
// ELF object, ahead of time: the runtime links or dlopens it and never
// needs LLVM.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using namespace kvq;

static LogicalResult lowerToLLVMDialect(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createSCFToControlFlowPass());
  // bf16 rounding as integer arithmetic: no libgcc soft-float helper needed.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

static std::unique_ptr<llvm::TargetMachine> createHostTargetMachine() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
    features.AddFeature(name, enabled);
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(), options,
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

FailureOr<std::string> kvq::compileToHostObject(ModuleOp module) {
  if (failed(lowerToLLVMDialect(module)))
    return failure();
  std::unique_ptr<llvm::TargetMachine> machine = createHostTargetMachine();
  if (!machine)
    return module.emitError("no LLVM target for the host");
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "kvq_kernels");
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  auto optimize = makeOptimizingTransformer(3, 0, machine.get());
  if (llvm::Error error = optimize(llvmModule.get()))
    return module.emitError("LLVM optimization failed: ")
           << llvm::toString(std::move(error));

  SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("the host target cannot emit object files");
  codegen.run(*llvmModule);
  return std::string(object.str());
}
