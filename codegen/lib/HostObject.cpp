//===- HostObject.cpp - LLVM-dialect host module to object code -----------===//
//
// LLVM dialect -> LLVM IR -> O3 for the host CPU -> ELF object, ahead of
// time: the runtime links or dlopens it and never needs LLVM. Part of the
// artifact writer; the MLIR lowering before it is kvq-host-to-llvm.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Support/HostFeatures.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using namespace kvq;

/// The target machine for `cpu` ("native": this machine's CPU and features),
/// with the x86 features kvq records for it (kvq/Support/HostFeatures.h).
static FailureOr<std::unique_ptr<llvm::TargetMachine>>
createHostTargetMachine(ModuleOp module, StringRef cpu,
                        SmallVectorImpl<std::string> &recorded) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(module.getLoc(), "no LLVM target for the host: ") << error;
  llvm::SubtargetFeatures features;
  std::string cpuName = cpu.str();
  if (cpu == "native") {
    cpuName = llvm::sys::getHostCPUName().str();
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      features.AddFeature(name, enabled);
  }
  // Check the name on a generic subtarget first: LLVM warns on stderr when
  // it creates a subtarget for an unknown CPU.
  std::unique_ptr<llvm::MCSubtargetInfo> generic(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!generic || !generic->isCPUStringValid(cpuName))
    return emitError(module.getLoc(), "unknown host CPU '")
           << cpu << "' for " << triple.str()
           << " (use 'native' or an LLVM CPU name such as x86-64-v3)";
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, cpuName, features.getString()));
  for (const char *name : kHostFeatureNames)
    if (subtarget->checkFeatures(std::string("+") + name))
      recorded.push_back(name);
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpuName, features.getString(), options, llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

FailureOr<HostObject> kvq::compileToHostObject(ModuleOp module,
                                               StringRef hostCPU) {
  HostObject result;
  FailureOr<std::unique_ptr<llvm::TargetMachine>> target =
      createHostTargetMachine(module, hostCPU, result.features);
  if (failed(target))
    return failure();
  std::unique_ptr<llvm::TargetMachine> machine = std::move(*target);
  result.cpu = machine->getTargetCPU().str();
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
  result.object = std::string(object.str());
  return result;
}
