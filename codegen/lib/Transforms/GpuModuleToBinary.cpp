//===- GpuModuleToBinary.cpp - GPU modules to PTX, a kernel a thread ------===//
//
// Upstream gpu-module-to-binary compiles a gpu.module as one LLVM module on
// one thread; for a 32-layer mixed spec that was the longest stage of the
// compile. A cache's kernels call nothing and each owns its tables and
// shared arrays, so each kernel is compiled alone, by the same target
// attributes, on the context's threads, and the PTX texts are joined under
// one header. The PTX of a kernel is the one its module would have given:
// NVPTX compiles functions one at a time.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"

#include "llvm/ADT/DenseSet.h"

namespace kvq {
#define GEN_PASS_DEF_KVQGPUMODULETOBINARY
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

using Object = SmallVector<char, 0>;

/// The ops of `module` each kernel needs: itself and the symbols it uses,
/// transitively; empty when the kernels cannot be compiled apart (a symbol
/// two kernels use, an op no kernel uses, or fewer than two kernels).
SmallVector<DenseSet<Operation *>> partitionByKernel(gpu::GPUModuleOp module) {
  SymbolTable table(module);
  SmallVector<DenseSet<Operation *>> parts;
  DenseSet<Operation *> taken;
  for (auto func : module.getOps<LLVM::LLVMFuncOp>()) {
    if (!func->hasAttr(gpu::GPUDialect::getKernelFuncAttrName()))
      continue;
    DenseSet<Operation *> &part = parts.emplace_back();
    SmallVector<Operation *> worklist = {func};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!part.insert(op).second)
        continue;
      if (!taken.insert(op).second)
        return {};
      if (std::optional<SymbolTable::UseRange> uses =
              SymbolTable::getSymbolUses(op))
        for (const SymbolTable::SymbolUse &use : *uses)
          if (Operation *symbol =
                  table.lookup(use.getSymbolRef().getRootReference()))
            worklist.push_back(symbol);
    }
  }
  if (parts.size() < 2 ||
      taken.size() != module.getBody()->getOperations().size())
    return {};
  return parts;
}

/// `module` with only the ops of `keep`, detached.
OwningOpRef<gpu::GPUModuleOp> cloneKeeping(gpu::GPUModuleOp module,
                                           const DenseSet<Operation *> &keep) {
  OwningOpRef<gpu::GPUModuleOp> clone = module.clone();
  SmallVector<Operation *> drop;
  for (auto [original, copy] :
       llvm::zip_equal(module.getBody()->getOperations(),
                       clone->getBody()->getOperations()))
    if (!keep.contains(&original))
      drop.push_back(&copy);
  for (Operation *op : drop)
    op->erase();
  return clone;
}

/// Where the PTX header (`.version`, `.target`, `.address_size`) ends.
std::optional<size_t> getHeaderEnd(StringRef ptx) {
  size_t line = ptx.find("\n.address_size");
  if (line == StringRef::npos)
    return std::nullopt;
  size_t end = ptx.find('\n', line + 1);
  return end == StringRef::npos ? ptx.size() : end + 1;
}

/// One PTX of the kernels' texts: the first header, then every body in
/// order; nullopt where the headers differ.
std::optional<Object> joinPTX(ArrayRef<Object> texts) {
  StringRef first(texts.front().data(), texts.front().size());
  std::optional<size_t> headerEnd = getHeaderEnd(first);
  if (!headerEnd)
    return std::nullopt;
  StringRef header = first.take_front(*headerEnd);
  Object joined(header.begin(), header.end());
  for (const Object &text : texts) {
    StringRef ptx(text.data(), text.size());
    if (getHeaderEnd(ptx) != headerEnd || !ptx.starts_with(header))
      return std::nullopt;
    joined.append(ptx.begin() + *headerEnd, ptx.end());
  }
  return joined;
}

struct KVQGpuModuleToBinaryPass
    : kvq::impl::KVQGpuModuleToBinaryBase<KVQGpuModuleToBinaryPass> {
  void runOnOperation() override {
    for (auto module : llvm::make_early_inc_range(
             getOperation().getBody()->getOps<gpu::GPUModuleOp>()))
      if (failed(toBinary(module)))
        return signalPassFailure();
  }

  LogicalResult toBinary(gpu::GPUModuleOp module) {
    ArrayAttr targets = module.getTargetsAttr();
    if (!targets || targets.empty())
      return module.emitError("the module has no target attributes");
    // Built before the threads start: they may only read it.
    SymbolTable parentTable(getOperation());
    auto getParentTable = [&]() -> SymbolTable * { return &parentTable; };
    gpu::TargetOptions options(
        /*toolkitPath=*/{}, /*librariesToLink=*/{}, /*cmdOptions=*/{},
        /*elfSection=*/{}, gpu::CompilationTarget::Assembly, getParentTable);
    // The parts, cloned here: threads only read them.
    SmallVector<OwningOpRef<gpu::GPUModuleOp>> clones;
    SmallVector<gpu::GPUModuleOp> parts = {module};
    if (SmallVector<DenseSet<Operation *>> kernels = partitionByKernel(module);
        !kernels.empty() && getContext().isMultithreadingEnabled()) {
      parts.clear();
      for (const DenseSet<Operation *> &keep : kernels)
        parts.push_back(*clones.emplace_back(cloneKeeping(module, keep)));
    }
    SmallVector<SmallVector<Object>> texts(targets.size(),
                                           SmallVector<Object>(parts.size()));
    if (failed(failableParallelForEachN(
            &getContext(), 0, parts.size(), [&](size_t part) {
              for (auto [target, attr] : llvm::enumerate(targets)) {
                std::optional<Object> text =
                    cast<gpu::TargetAttrInterface>(attr).serializeToObject(
                        parts[part], options);
                if (!text)
                  return failure();
                texts[target][part] = std::move(*text);
              }
              return success();
            })))
      return module.emitError("a kernel failed to compile to PTX");

    SmallVector<Attribute> objects;
    for (auto [attr, kernelTexts] : llvm::zip_equal(targets, texts)) {
      std::optional<Object> ptx = joinPTX(kernelTexts);
      if (!ptx)
        return module.emitError("the kernels' PTX headers differ");
      Attribute object = cast<gpu::TargetAttrInterface>(attr).createObject(
          module, *ptx, options);
      if (!object)
        return module.emitError("cannot make a GPU object of the PTX");
      objects.push_back(object);
    }
    OpBuilder builder(module);
    gpu::BinaryOp::create(
        builder, module.getLoc(), module.getName(),
        dyn_cast_or_null<gpu::OffloadingLLVMTranslationAttrInterface>(
            module.getOffloadingHandlerAttr()),
        builder.getArrayAttr(objects));
    module->erase();
    return success();
  }
};

} // namespace
