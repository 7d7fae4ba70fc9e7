//===- KernelPlan.cpp - which kernels a cache needs -----------------------===//

#include "ChannelTables.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace kvq;

SmallVector<ArgKind> KernelSpec::getArgs() const {
  const abi::KernelDesc &desc = abi::getKernel(kind);
  return llvm::map_to_vector(ArrayRef(desc.Args, desc.NumArgs),
                             [](const abi::ArgDesc &arg) { return arg.Kind; });
}

StringRef KernelSpec::getKindName() const { return abi::getKernel(kind).Name; }

void kvq::planKernels(CacheOp cache, const CacheLayout &layout, OpBuilder &b) {
  // Kernel names start with the cache's, so that the host code of several
  // caches links into one program. Layers with the same schemes share kernels:
  // keyed by the (uniqued) scheme attributes, in first-use order.
  // A kernel also specializes on cross-layer sharing: how far back the
  // layer whose codes it reads is. Per-layer tables (channel reorder, clip
  // tables) are rows of its constant tables, picked by the launch's
  // tableRow; of the layout they give, only the words a token's codes take
  // can differ between layers of one scheme, and the kernel's addressing
  // bakes that in.
  using Key = std::tuple<Attribute, int64_t, int64_t>;
  auto keyOf = [&](const TensorLayout &tensor, unsigned l) -> Key {
    const SliceLayout &slice = tensor.layers[l];
    return {slice.scheme,
            slice.sharesCodes() ? int64_t(l) - slice.CodesFrom : 0,
            hasChannelTables(slice) ? int64_t(slice.WordsPerToken) : -1};
  };
  // Attention also specializes on whether the layer has OTT pools.
  llvm::MapVector<std::tuple<Key, Key, int64_t>, SmallVector<int64_t>> attend;
  llvm::MapVector<Key, SmallVector<int64_t>> flush[2];
  SmallVector<int64_t> keyNorm, tracked;
  for (unsigned l = 0; l < layout.model.getLayers(); ++l) {
    flush[0][keyOf(layout.keys, l)].push_back(l);
    flush[1][keyOf(layout.values, l)].push_back(l);
    attend[{keyOf(layout.keys, l), keyOf(layout.values, l),
            int64_t(layout.hasPool(l))}]
        .push_back(l);
    if (layout.hasKeyNorm(l))
      keyNorm.push_back(l);
    if (layout.hasPool(l))
      tracked.push_back(l);
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(cache);
  Location loc = cache.getLoc();
  StringRef cacheRef = cache.getSymName();
  for (TensorKind tensor : {TensorKind::Keys, TensorKind::Values})
    for (auto [index, entry] :
         llvm::enumerate(flush[tensor == TensorKind::Keys ? 0 : 1]))
      FlushKernelOp::create(b, loc,
                            llvm::formatv("{0}_flush_{1}_{2}", cacheRef,
                                          stringifyTensorKind(tensor), index)
                                .str(),
                            cacheRef, tensor, ArrayRef<int64_t>(entry.second));
  if (!keyNorm.empty())
    KeyNormKernelOp::create(b, loc, (cacheRef + "_keynorm").str(), cacheRef,
                            ArrayRef<int64_t>(keyNorm));
  if (!tracked.empty())
    TrackKernelOp::create(b, loc, (cacheRef + "_track").str(), cacheRef,
                          ArrayRef<int64_t>(tracked));
  for (auto [index, entry] : llvm::enumerate(attend))
    AttendKernelOp::create(b, loc, (cacheRef + "_attend_" + Twine(index)).str(),
                           cacheRef, ArrayRef<int64_t>(entry.second),
                           /*cpu_forms=*/AttendFormsAttr(),
                           /*gpu_forms=*/AttendFormsAttr());
}

KernelSpec kvq::getKernelSpec(Operation *kernelOp) {
  KernelSpec spec;
  spec.name =
      kernelOp->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName())
          .str();
  spec.layers = llvm::to_vector(
      kernelOp->getAttrOfType<DenseI64ArrayAttr>("layers").asArrayRef());
  if (auto flush = dyn_cast<FlushKernelOp>(kernelOp)) {
    spec.kind = KernelKind::Flush;
    spec.isKeys = flush.getTensor() == TensorKind::Keys;
  } else if (isa<KeyNormKernelOp>(kernelOp)) {
    spec.kind = KernelKind::KeyNorm;
  } else if (isa<TrackKernelOp>(kernelOp)) {
    spec.kind = KernelKind::Track;
  } else {
    assert(isa<AttendKernelOp>(kernelOp) && "not a kernel op");
    spec.kind = KernelKind::Attend;
  }
  return spec;
}

static constexpr StringLiteral kLoweredKernelAttrName = "kvq.kernel";

NamedAttribute kvq::getLoweredKernelAttr(Operation *kernelOp) {
  KernelSpec spec = getKernelSpec(kernelOp);
  Builder b(kernelOp->getContext());
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("kind", b.getStringAttr(spec.getKindName())),
      b.getNamedAttr("layers", kernelOp->getAttr("layers"))};
  if (spec.kind == KernelKind::Flush)
    fields.push_back(b.getNamedAttr(
        "tensor", b.getStringAttr(stringifyTensorKind(
                      spec.isKeys ? TensorKind::Keys : TensorKind::Values))));
  return b.getNamedAttr(kLoweredKernelAttrName, b.getDictionaryAttr(fields));
}

std::optional<LoweredKernel> kvq::getLoweredKernel(Operation *func) {
  auto attr = func->getAttrOfType<DictionaryAttr>(kLoweredKernelAttrName);
  if (!attr)
    return std::nullopt;
  auto kindName = attr.getAs<StringAttr>("kind");
  auto layers = attr.getAs<DenseI64ArrayAttr>("layers");
  auto tensor = attr.getAs<StringAttr>("tensor");
  auto deviceUnits = attr.getAs<IntegerAttr>("device_units");
  if (!kindName || !layers || layers.empty())
    return std::nullopt;
  const abi::KernelDesc *kind = abi::findKernel(kindName.str().c_str());
  if (!kind)
    return std::nullopt;
  KernelSpec spec;
  spec.name = SymbolTable::getSymbolName(func).str();
  spec.kind = kind->Kind;
  spec.layers = llvm::to_vector(layers.asArrayRef());
  spec.isKeys =
      !tensor || symbolizeTensorKind(tensor.getValue()) == TensorKind::Keys;
  return LoweredKernel{std::move(spec),
                       deviceUnits ? static_cast<unsigned>(deviceUnits.getInt())
                                   : 1u};
}

std::string kvq::getHostModuleName(CacheOp cache) {
  return (cache.getSymName() + "_host").str();
}

FailureOr<CacheOp> kvq::getKernelModuleCache(ModuleOp top, Operation *module) {
  auto name = module->getAttrOfType<FlatSymbolRefAttr>("kvq.cache");
  if (!name)
    return CacheOp();
  auto cache = SymbolTable::lookupNearestSymbolFrom<CacheOp>(top, name);
  if (!cache)
    return module->emitError("names no kvq.cache ") << name;
  return cache;
}

LogicalResult
kvq::forEachCacheModule(ModuleOp top,
                        function_ref<LogicalResult(Operation *, CacheOp)> fn) {
  for (Operation &op : *top.getBody()) {
    if (!isa<ModuleOp, gpu::GPUModuleOp>(op))
      continue;
    FailureOr<CacheOp> cache = getKernelModuleCache(top, &op);
    if (failed(cache))
      return failure();
    if (*cache && failed(fn(&op, *cache)))
      return failure();
  }
  return success();
}

LogicalResult kvq::forEachKernelModule(
    ModuleOp top,
    function_ref<LogicalResult(Operation *, const TargetInfo &)> fn) {
  return forEachCacheModule(top, [&](Operation *module, CacheOp cache) {
    TargetAttr target = getCacheTarget(cache);
    return fn(module, isa<gpu::GPUModuleOp>(module) ? getGPUTargetInfo(target)
                                                    : getCPUTargetInfo(target));
  });
}

std::string kvq::getProgramModuleName(CacheOp cache) {
  return (cache.getSymName() + "_program").str();
}

std::string kvq::getDeviceModuleName(CacheOp cache) {
  return (cache.getSymName() + "_kernels").str();
}

void kvq::emitKernel(const KernelSpec &spec, const CacheLayout &layout,
                     KernelTarget &target, OpBuilder &b, Location loc) {
  OpBuilder::InsertionGuard guard(b);
  KernelEntry entry = target.createKernel(b, loc, spec.name, spec.getArgs());
  KernelBuilder kb(b, loc, target);
  switch (spec.kind) {
  case KernelKind::KeyNorm:
  case KernelKind::Track:
  case KernelKind::Flush:
    llvm_unreachable("built as a program (buildFlushProgram, ...)");
  case KernelKind::Attend:
    emitAttendKernel(kb, entry, layout, spec.layers, spec.forms);
    break;
  }
  target.finishKernel(b, loc);
}

unsigned kvq::getLanes(const TargetInfo &info, unsigned count) {
  unsigned lanes = info.vectorLanes;
  while (count % lanes != 0)
    lanes /= 2;
  return lanes;
}

unsigned kvq::getBlockUnits(const TargetInfo &info, unsigned tasks) {
  return std::max(1u, info.blockThreads * info.loadsInFlight / tasks);
}
