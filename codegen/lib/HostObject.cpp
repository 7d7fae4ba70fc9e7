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

/// The LLVM target of this machine's triple.
static FailureOr<const llvm::Target *> lookupHostTarget(ModuleOp module) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(
      llvm::Triple(llvm::sys::getDefaultTargetTriple()), error);
  if (!target)
    return emitError(module.getLoc(), "no LLVM target for the host: ") << error;
  return target;
}

FailureOr<HostTarget> kvq::resolveHostTarget(ModuleOp module,
                                             StringRef hostCPU) {
  FailureOr<const llvm::Target *> target = lookupHostTarget(module);
  if (failed(target))
    return failure();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  llvm::SubtargetFeatures features;
  HostTarget result;
  result.cpu = hostCPU.str();
  if (hostCPU == "native") {
    result.cpu = llvm::sys::getHostCPUName().str();
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      features.AddFeature(name, enabled);
  }
  // Check the name on a generic subtarget first: LLVM warns on stderr when
  // it creates a subtarget for an unknown CPU.
  std::unique_ptr<llvm::MCSubtargetInfo> generic(
      (*target)->createMCSubtargetInfo(triple, "", ""));
  if (!generic || !generic->isCPUStringValid(result.cpu))
    return emitError(module.getLoc(), "unknown host CPU '")
           << hostCPU << "' for " << triple.str()
           << " (use 'native' or an LLVM CPU name such as x86-64-v3)";
  result.llvmFeatures = features.getString();
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      (*target)->createMCSubtargetInfo(triple, result.cpu,
                                       result.llvmFeatures));
  for (const char *name : kHostFeatureNames)
    if (subtarget->checkFeatures(std::string("+") + name))
      result.features.push_back(name);
  return result;
}

static bool hasFeature(const HostTarget &host, StringRef name) {
  return llvm::is_contained(host.features, name);
}

unsigned kvq::getVectorLanes(const HostTarget &host) {
  if (hasFeature(host, "avx512f"))
    return 16;
  return hasFeature(host, "avx") ? 8 : 4;
}

DotUnitAttr kvq::getHostDotUnit(MLIRContext *ctx, const HostTarget &host) {
  if (getVectorLanes(host) != 16 || !hasFeature(host, "avx512vnni") ||
      !hasFeature(host, "avx512bw"))
    return {};
  auto i16 = IntegerType::get(ctx, 16), i32 = IntegerType::get(ctx, 32);
  return DotUnitAttr::get(ctx, /*m=*/16, /*n=*/1, /*k=*/2, i16, i32);
}

FailureOr<std::string> kvq::compileToHostObject(ModuleOp module,
                                                const HostTarget &host) {
  FailureOr<const llvm::Target *> target = lookupHostTarget(module);
  if (failed(target))
    return failure();
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine((*target)->createTargetMachine(
      llvm::Triple(llvm::sys::getDefaultTargetTriple()), host.cpu,
      host.llvmFeatures, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
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
