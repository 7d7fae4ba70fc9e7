//===- HostObject.cpp - LLVM-dialect host module to object code -----------===//
//
// LLVM dialect -> LLVM IR -> O3 for the host CPU -> ELF object, ahead of
// time, one kernel at a time on the context's threads, then one relocatable
// object: the runtime links or dlopens it and never needs LLVM. Part of the
// artifact writer; the MLIR lowering before it is kvq-host-to-llvm.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Codegen/IntegerFactors.h"
#include "kvq/Support/HostFeatures.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Threading.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
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

DotUnitAttr kvq::getHostDotUnit(MLIRContext *ctx, const HostTarget &host,
                                unsigned factorBits) {
  std::optional<IntegerDots> dots = IntegerDots::getForFactorBits(factorBits);
  if (getVectorLanes(host) != 16 || !hasFeature(host, "avx512vnni") ||
      !hasFeature(host, "avx512bw") || !dots)
    return {};
  return dots->getUnit(ctx);
}

/// `module` (LLVM dialect) as an ELF object at O3 for `host`.
static FailureOr<std::string> compileModule(ModuleOp module,
                                            const llvm::Target &target,
                                            const HostTarget &host) {
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target.createTargetMachine(
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

static bool hasLocalLinkage(LLVM::GlobalOp global) {
  return global.getLinkage() == LLVM::Linkage::Private ||
         global.getLinkage() == LLVM::Linkage::Internal;
}

/// The module of one kernel of `host`: the kernel, every function
/// declaration and the kernel's own tables (globals of local linkage it
/// names), plus, in the first kernel's module only, the globals of other
/// linkage (the manifest hash). Null when the kernel names such a global,
/// which only one object may define.
static OwningOpRef<ModuleOp>
cloneKernelModule(ModuleOp host, LLVM::LLVMFuncOp kernel, bool first) {
  llvm::DenseSet<StringAttr> named;
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(kernel))
    for (const SymbolTable::SymbolUse &use : *uses)
      named.insert(use.getSymbolRef().getRootReference());
  OpBuilder b(host.getContext());
  OwningOpRef<ModuleOp> part = ModuleOp::create(host.getLoc());
  (*part)->setAttrs(host->getAttrs());
  b.setInsertionPointToEnd(part->getBody());
  for (Operation &op : host.getBody()->getOperations()) {
    if (auto function = dyn_cast<LLVM::LLVMFuncOp>(op)) {
      if (function.isExternal() || function == kernel)
        b.clone(op);
      continue;
    }
    auto global = dyn_cast<LLVM::GlobalOp>(op);
    bool isNamed = global && named.contains(global.getSymNameAttr());
    if (global && !hasLocalLinkage(global) && isNamed)
      return nullptr;
    if (!global || (hasLocalLinkage(global) ? isNamed : first))
      b.clone(op);
  }
  return part;
}

LogicalResult kvq::runSystemCompiler(Location loc, ArrayRef<StringRef> args,
                                     const Twine &what) {
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return emitError(loc, "no C compiler ('cc') for ") << what;
  SmallVector<StringRef> argv = {*cc};
  argv.append(args.begin(), args.end());
  std::string error;
  if (llvm::sys::ExecuteAndWait(*cc, argv, std::nullopt, {}, 0, 0, &error) != 0)
    return emitError(loc) << what << " failed: " << error;
  return success();
}

/// Links relocatable `objects` into one with the system C compiler (a
/// partial link, `cc -r`), through temporary files.
static FailureOr<std::string> linkObjects(Location loc,
                                          ArrayRef<std::string> objects) {
  // paths[0] is the output, then one file per object.
  std::vector<std::string> paths;
  auto removeAll = llvm::make_scope_exit([&] {
    for (const std::string &path : paths)
      llvm::sys::fs::remove(path);
  });
  for (size_t i = 0; i <= objects.size(); ++i) {
    SmallString<128> path;
    if (std::error_code error =
            llvm::sys::fs::createTemporaryFile("kvq-kernel", "o", path))
      return emitError(loc, "cannot create a temporary file: ")
             << error.message();
    paths.push_back(path.str().str());
    if (i == 0)
      continue;
    std::error_code error;
    llvm::raw_fd_ostream os(paths.back(), error);
    os << objects[i - 1];
    os.close();
    if (error || os.has_error())
      return emitError(loc, "cannot write ") << paths.back();
  }
  SmallVector<StringRef> args = {"-r", "-nostdlib", "-o"};
  args.append(paths.begin(), paths.end());
  if (failed(runSystemCompiler(loc, args,
                               "the partial link of the host "
                               "objects")))
    return failure();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> linked =
      llvm::MemoryBuffer::getFile(paths[0], /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!linked)
    return emitError(loc, "cannot read ") << paths[0];
  return (*linked)->getBuffer().str();
}

FailureOr<std::string> kvq::compileToHostObject(ModuleOp module,
                                                const HostTarget &host) {
  FailureOr<const llvm::Target *> target = lookupHostTarget(module);
  if (failed(target))
    return failure();
  // Each kernel compiles alone, on the context's threads (the kernels call
  // no function of each other, so O3 gives each the code it gets in one
  // module); a partial link makes one object of them. One object a kernel,
  // not one a thread: kernels.o is the same on every machine.
  SmallVector<OwningOpRef<ModuleOp>> parts;
  for (auto kernel : module.getOps<LLVM::LLVMFuncOp>()) {
    if (kernel.isExternal())
      continue;
    parts.push_back(cloneKernelModule(module, kernel, parts.empty()));
    if (!parts.back())
      return compileModule(module, **target, host);
  }
  if (parts.size() <= 1)
    return compileModule(module, **target, host);
  SmallVector<std::string> objects(parts.size());
  if (failed(failableParallelForEachN(
          module.getContext(), 0, parts.size(), [&](size_t i) {
            FailureOr<std::string> object =
                compileModule(*parts[i], **target, host);
            if (failed(object))
              return failure();
            objects[i] = std::move(*object);
            return success();
          })))
    return failure();
  return linkObjects(module.getLoc(), objects);
}
