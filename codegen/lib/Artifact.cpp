//===- Artifact.cpp - compile a cache into an artifact directory ----------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Analysis/BitAccounting.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kvq;

static constexpr int kManifestVersion = 1;

ArrayRef<std::string> kvq::getArtifactChips() {
  static const std::string chips[] = {"sm_80", "sm_90"};
  return chips;
}

/// The kernel serving each layer, read from the kernel ops.
struct LayerKernels {
  std::string flush[2], attend, keyNorm;
};

static SmallVector<LayerKernels> mapLayerKernels(ModuleOp planned,
                                                 unsigned numLayers) {
  SmallVector<LayerKernels> layers(numLayers);
  auto forLayers = [&](Operation *op, auto &&assign) {
    for (int64_t l :
         op->getAttrOfType<DenseI64ArrayAttr>("layers").asArrayRef())
      assign(layers[l], SymbolTable::getSymbolName(op).str());
  };
  for (Operation &op : planned.getBody()->getOperations()) {
    if (auto flush = dyn_cast<FlushKernelOp>(op))
      forLayers(flush, [&](LayerKernels &k, std::string name) {
        k.flush[flush.getTensor() == TensorKind::Keys ? 0 : 1] = name;
      });
    else if (isa<AttendKernelOp>(op))
      forLayers(&op,
                [](LayerKernels &k, std::string name) { k.attend = name; });
    else if (isa<KeyNormKernelOp>(op))
      forLayers(&op,
                [](LayerKernels &k, std::string name) { k.keyNorm = name; });
  }
  return layers;
}

/// Runs `passes` on a copy of `planned` without its kvq.cache, leaving
/// kernel functions only.
static FailureOr<OwningOpRef<ModuleOp>>
lowerCopy(ModuleOp planned, function_ref<void(PassManager &)> passes) {
  OwningOpRef<ModuleOp> copy = cast<ModuleOp>(planned->clone());
  PassManager pm(planned.getContext());
  passes(pm);
  if (failed(pm.run(*copy)))
    return failure();
  for (CacheOp cache : llvm::to_vector((*copy).getOps<CacheOp>()))
    cache.erase();
  return copy;
}

static llvm::json::Object describeSlice(const SliceLayout &slice) {
  if (!slice.isQuantized())
    return llvm::json::Object{{"kind", "full_precision"}};
  QuantAttr quant = slice.quant;
  std::string params;
  llvm::raw_string_ostream(params) << quant.getParamType();
  return llvm::json::Object{{"kind", "quant"},
                            {"bits", quant.getBits()},
                            {"mode", stringifyMode(quant.getMode())},
                            {"span", stringifySpan(quant.getSpan())},
                            {"group", quant.getGroup()},
                            {"levels", quant.getNumLevels()},
                            {"eta", quant.getEtaValue()},
                            {"clip", quant.getUniformClip().value_or(1.0)},
                            {"params", params},
                            {"param_bytes", slice.paramBytes},
                            {"key_norm", quant.getKeyNorm()},
                            {"words_per_group", slice.wordsPerGroup},
                            {"groups_per_page", slice.groupsPerPage},
                            {"codes_bytes", slice.codesBytes},
                            {"scales_offset", slice.scalesOffset},
                            {"zeros_offset", slice.zerosOffset}};
}

static llvm::json::Object describeTensor(const TensorLayout &tensor,
                                         ArrayRef<LayerKernels> kernels,
                                         bool isKeys) {
  llvm::json::Array layers;
  for (auto [l, slice] : llvm::enumerate(tensor.layers))
    layers.push_back(llvm::json::Object{
        {"offset", tensor.layerOffsets[l]},
        {"slice_bytes", slice.sliceBytes},
        {"flush_kernel", kernels[l].flush[isKeys ? 0 : 1]},
        {"codes_from",
         slice.codesFrom ? int64_t(*slice.codesFrom) : int64_t(-1)},
        {"scheme", describeSlice(slice)}});
  WindowAttr window = tensor.window;
  return llvm::json::Object{{"sink", window.getSink()},
                            {"recent", window.getRecent()},
                            {"flush", window.getFlush()},
                            {"window_capacity", tensor.windowCapacity},
                            {"page_bytes", tensor.pageBytes},
                            {"layers", std::move(layers)}};
}

static llvm::json::Value describeCache(CacheOp cache, const CacheLayout &layout,
                                       ModuleOp planned,
                                       const HostObject &host) {
  SmallVector<LayerKernels> layerKernels =
      mapLayerKernels(planned, layout.model.getLayers());
  ModelAttr model = layout.model;
  std::string dtype;
  llvm::raw_string_ostream(dtype) << model.getDtype();
  EquivalentBits bits = computeEquivalentBits(cache);
  llvm::json::Array layers, kernels;
  for (const LayerKernels &layer : layerKernels)
    layers.push_back(llvm::json::Object{{"attend_kernel", layer.attend},
                                        {"keynorm_kernel", layer.keyNorm}});
  std::string combine;
  for (Operation &op : planned.getBody()->getOperations()) {
    if (isa<CacheOp>(op))
      continue;
    KernelSpec spec = getKernelSpec(&op);
    if (spec.kind == KernelKind::Combine)
      combine = spec.name;
    llvm::json::Array args;
    for (ArgKind kind : spec.getArgs())
      args.push_back(kind == ArgKind::I32 ? "i32" : "ptr");
    kernels.push_back(llvm::json::Object{
        {"name", spec.name},
        {"kind", spec.getKindName()},
        {"block", llvm::json::Array{KernelTarget::kBlockThreads, 1, 1}},
        {"shared_bytes", 0},
        {"args", std::move(args)}});
  }
  llvm::json::Object ptx;
  for (const std::string &chip : getArtifactChips())
    ptx[chip] = "kernels." + chip + ".ptx";
  return llvm::json::Object{
      {"version", kManifestVersion},
      {"name", cache.getSymName()},
      {"model", llvm::json::Object{{"layers", model.getLayers()},
                                   {"heads", model.getHeads()},
                                   {"kv_heads", model.getKvHeads()},
                                   {"head_dim", model.getHeadDim()},
                                   {"dtype", dtype},
                                   {"dtype_bytes", layout.dtypeBytes},
                                   {"scale", model.getSoftmaxScale()}}},
      {"page_tokens", layout.pageTokens},
      {"split_tokens", layout.splitTokens},
      {"bits", llvm::json::Object{{"code_bits", bits.codeBits},
                                  {"storage_bits", bits.storageBits}}},
      {"tensors",
       llvm::json::Object{
           {"keys", describeTensor(layout.keys, layerKernels, true)},
           {"values", describeTensor(layout.values, layerKernels, false)}}},
      {"layers", std::move(layers)},
      {"combine_kernel", combine},
      {"kernels", std::move(kernels)},
      {"host",
       llvm::json::Object{{"cpu", host.cpu},
                          {"features", llvm::json::Array(host.features)}}},
      {"files", llvm::json::Object{{"ptx", std::move(ptx)},
                                   {"host_object", "kernels.o"},
                                   {"host_shared", "kernels.so"}}}};
}

static LogicalResult writeFile(Operation *op, StringRef path,
                               StringRef contents) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  if (error)
    return op->emitError("cannot write ") << path << ": " << error.message();
  os << contents;
  return success();
}

/// Links the host object into a shared object with the system C compiler.
static LogicalResult linkSharedObject(Operation *op, StringRef object,
                                      StringRef shared) {
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return op->emitError("no C compiler ('cc') to link ") << shared;
  std::string error;
  StringRef args[] = {*cc, "-shared", "-o", shared, object, "-lm"};
  if (llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &error) != 0)
    return op->emitError("linking ") << shared << " failed: " << error;
  return success();
}

LogicalResult kvq::compileArtifact(CacheOp cache, StringRef dir,
                                   StringRef hostCPU) {
  FailureOr<CacheLayout> layout = computeCacheLayout(cache);
  if (failed(layout))
    return failure();
  // The cache and its kernel declarations, in a module of their own: the
  // input IR stays as it was.
  OwningOpRef<ModuleOp> planned = ModuleOp::create(cache.getLoc());
  planned->getBody()->push_back(cache->clone());
  PassManager pm(cache.getContext());
  pm.addPass(createKVQPlanKernels());
  if (failed(pm.run(*planned)))
    return failure();

  auto lowerFor = [&](StringRef target) {
    return lowerCopy(*planned, [&](PassManager &pm) {
      KVQLowerKernelsOptions options;
      options.target = target.str();
      pm.addPass(createKVQLowerKernels(options));
      pm.addPass(createKVQExpandDequantize());
    });
  };
  FailureOr<OwningOpRef<ModuleOp>> host = lowerFor("cpu");
  FailureOr<OwningOpRef<ModuleOp>> device = lowerFor("gpu");
  if (failed(host) || failed(device))
    return failure();
  FailureOr<HostObject> object = compileToHostObject(**host, hostCPU);
  FailureOr<SmallVector<std::string>> ptx =
      compileToPTX(**device, getArtifactChips());
  if (failed(object) || failed(ptx))
    return failure();

  if (std::error_code error = llvm::sys::fs::create_directories(dir))
    return cache.emitError("cannot create ") << dir << ": " << error.message();
  auto path = [&](StringRef name) {
    SmallString<256> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result);
  };
  for (auto [chip, text] : llvm::zip(getArtifactChips(), *ptx))
    if (failed(writeFile(cache, path("kernels." + chip + ".ptx"), text)))
      return failure();
  std::string manifest;
  llvm::raw_string_ostream(manifest)
      << llvm::formatv("{0:2}",
                       describeCache(cache, *layout, *planned, *object))
      << "\n";
  if (failed(writeFile(cache, path("kernels.o"), object->object)) ||
      failed(linkSharedObject(cache, path("kernels.o"), path("kernels.so"))) ||
      failed(writeFile(cache, path("manifest.json"), manifest)))
    return failure();
  return success();
}
