//===- Artifact.cpp - the artifact writer ---------------------------------===//
//
// Reads what kvq-compile-pipeline left (the kvq.cache ops, per cache an
// LLVM-dialect host module and a gpu.binary) and writes the artifact
// directory. Outside any pass: it writes files and runs the system compiler.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"
#include "kvq/Analysis/BitAccounting.h"
#include "kvq/Codegen/Kernels.h"
#include "kvq/ABI/ManifestBinding.h"
#include "kvq/ABI/ManifestSchema.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kvq;

namespace key = manifest::key;

/// The kernel serving each layer.
struct LayerKernels {
  std::string flush[2], attend, keyNorm, track;
};

static SmallVector<LayerKernels>
mapLayerKernels(ArrayRef<LoweredKernel> kernels, unsigned numLayers) {
  SmallVector<LayerKernels> layers(numLayers);
  for (const LoweredKernel &kernel : kernels) {
    for (int64_t l : kernel.spec.layers) {
      LayerKernels &layer = layers[l];
      const KernelSpec &spec = kernel.spec;
      if (spec.kind == KernelKind::Flush)
        layer.flush[spec.isKeys ? 0 : 1] = spec.name;
      else if (spec.kind == KernelKind::Attend)
        layer.attend = spec.name;
      else if (spec.kind == KernelKind::KeyNorm)
        layer.keyNorm = spec.name;
      else if (spec.kind == KernelKind::Track)
        layer.track = spec.name;
    }
  }
  return layers;
}

/// A slice's layout: every field of kvq/ABI/CacheLayout.h under its key.
static llvm::json::Object describeSlice(const abi::SliceLayout &slice) {
  llvm::json::Object object;
#define KVQ_SLICE_LAYOUT_KEY(Type, Id, Default) object[key::Id] = slice.Id;
  KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_KEY)
#undef KVQ_SLICE_LAYOUT_KEY
  object[key::GroupWords] = llvm::json::Array(slice.GroupWords);
  return object;
}

static llvm::json::Object describeScheme(const SliceLayout &slice) {
  if (!slice.isQuantized())
    return llvm::json::Object{
        {key::Kind, manifest::scheme_kind::FullPrecision}};
  QuantAttr quant = slice.quant;
  std::string params;
  llvm::raw_string_ostream(params) << quant.getParams();
  return llvm::json::Object{{key::Kind, manifest::scheme_kind::Quant},
                            {key::Bits, quant.getBits()},
                            {key::Mode, stringifyMode(quant.getMode())},
                            {key::Span, stringifySpan(quant.getSpan())},
                            {key::Group, quant.getGroup()},
                            {key::Levels, quant.getNumLevels()},
                            {key::Eta, quant.getEtaValue().value_or(0.0)},
                            {key::Clip, quant.getUniformClip().value_or(1.0)},
                            {key::Params, params},
                            {key::KeyNorm, quant.getKeyNorm()},
                            {key::PreRope, bool(quant.getPreRope())}};
}

/// `table`'s rows of `row` entries (one per kv-head).
template <typename T>
static llvm::json::Array describeRows(ArrayRef<T> table, size_t row) {
  llvm::json::Array rows;
  for (size_t first = 0; first < table.size(); first += row)
    rows.push_back(llvm::json::Array(table.slice(first, row)));
  return rows;
}

/// Adds channel reorder and clip tables to a scheme's description
/// (docs/KernelABI.md, "Channel reorder and clip tables").
static void describeTables(llvm::json::Object &scheme, const SliceLayout &slice,
                           ModelAttr model, unsigned layer) {
  SliceTables tables = getSliceTables(slice, model, layer);
  if (slice.hasReorder())
    scheme[key::Reorder] = llvm::json::Object{
        {key::Perm, describeRows<int32_t>(tables.perm, model.getHeadDim())},
        {key::Sizes,
         describeRows<int32_t>(tables.sizes, slice.GroupsPerToken)}};
  if (!tables.clips.empty())
    scheme[key::ClipTable] =
        describeRows<float>(tables.clips, tables.clipsPerHead);
}

static llvm::json::Object describeTensor(const TensorLayout &tensor,
                                         ArrayRef<LayerKernels> kernels,
                                         bool isKeys, ModelAttr model) {
  llvm::json::Array layers;
  for (auto [l, slice] : llvm::enumerate(tensor.layers)) {
    llvm::json::Object scheme = describeScheme(slice);
    describeTables(scheme, slice, model, l);
    layers.push_back(
        llvm::json::Object{{key::Slice, describeSlice(slice)},
                           {key::FlushKernel, kernels[l].flush[isKeys ? 0 : 1]},
                           {key::Scheme, std::move(scheme)}});
  }
  WindowAttr window = tensor.window;
  return llvm::json::Object{{key::Sink, window.getSink()},
                            {key::Recent, window.getRecent()},
                            {key::Flush, window.getFlush()},
                            {key::WindowCapacity, tensor.windowCapacity},
                            {key::PageBytes, tensor.pageBytes},
                            {key::Layers, std::move(layers)}};
}

/// OTT pools; zeros (and first_layer = layers) without them.
static llvm::json::Object describePool(const CacheLayout &layout) {
  PoolLayoutAttr pool = layout.pool;
  if (!pool)
    return llvm::json::Object{{key::Capacity, 0},
                              {key::Extra, 0},
                              {key::FirstLayer, layout.model.getLayers()},
                              {key::Entries, 0},
                              {key::IndexWords, 0}};
  return llvm::json::Object{{key::Capacity, pool.getCapacity()},
                            {key::Extra, pool.getExtra()},
                            {key::FirstLayer, pool.getFirstLayer()},
                            {key::Entries, pool.getEntries()},
                            {key::IndexWords, pool.getIndexWords()}};
}

static llvm::json::Value describeCache(CacheOp cache, const CacheLayout &layout,
                                       ArrayRef<LoweredKernel> lowered,
                                       ArrayRef<std::string> chips,
                                       const HostTarget &host) {
  SmallVector<LayerKernels> layerKernels =
      mapLayerKernels(lowered, layout.model.getLayers());
  ModelAttr model = layout.model;
  std::string dtype;
  llvm::raw_string_ostream(dtype) << model.getDtype();
  EquivalentBits bits = computeEquivalentBits(cache);
  llvm::json::Array layers, kernels;
  for (const LayerKernels &layer : layerKernels)
    layers.push_back(llvm::json::Object{{key::AttendKernel, layer.attend},
                                        {key::KeynormKernel, layer.keyNorm},
                                        {key::TrackKernel, layer.track}});
  for (const LoweredKernel &kernel : lowered) {
    const KernelSpec &spec = kernel.spec;
    llvm::json::Array args;
    for (ArgKind kind : spec.getArgs())
      args.push_back(abi::getManifestName(kind));
    kernels.push_back(llvm::json::Object{
        {key::Name, spec.name},
        {key::Kind, spec.getKindName()},
        {key::Block,
         llvm::json::Array{getCacheTarget(cache).getBlockThreads(), 1, 1}},
        {key::SharedBytes, 0},
        {key::DeviceUnits, kernel.deviceUnits},
        {key::Args, std::move(args)}});
  }
  llvm::json::Object ptx;
  for (const std::string &chip : chips)
    ptx[chip] = "kernels." + chip + ".ptx";
  return llvm::json::Object{
      {key::Version, manifest::kVersion},
      {key::Name, cache.getSymName()},
      {key::Model,
       llvm::json::Object{{key::Layers, model.getLayers()},
                          {key::Heads, model.getHeads()},
                          {key::KvHeads, model.getKvHeads()},
                          {key::HeadDim, model.getHeadDim()},
                          {key::Dtype, dtype},
                          {key::DtypeBytes, layout.dtypeBytes},
                          {key::Scale, model.getSoftmaxScale()},
                          {key::ChannelOrder,
                           stringifyChannelOrder(cache.getChannelOrder())}}},
      {key::PageTokens, layout.pageTokens},
      {key::SplitTokens, layout.splitTokens},
      {key::SplitGranule, layout.splitGranule},
      {key::Bits, llvm::json::Object{{key::CodeBits, bits.codeBits},
                                     {key::StorageBits, bits.storageBits}}},
      {key::Tensors,
       llvm::json::Object{
           {key::Keys, describeTensor(layout.keys, layerKernels, true, model)},
           {key::Values,
            describeTensor(layout.values, layerKernels, false, model)}}},
      {key::Layers, std::move(layers)},
      {key::Pool, describePool(layout)},
      {key::Kernels, std::move(kernels)},
      {key::Host,
       llvm::json::Object{{key::Cpu, host.cpu},
                          {key::Features, llvm::json::Array(host.features)},
                          {key::SplitTokens, layout.hostSplitTokens}}},
      {key::Files, llvm::json::Object{
                       {key::Ptx, std::move(ptx)},
                       {key::HostObject, "kernels.o"},
                       {key::HostShared, "kernels.so"},
                       // Filled in once kernels.so is linked.
                       {key::HostSharedFnv1a, formatHostSharedChecksum(0)}}}};
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
  StringRef args[] = {"-shared", "-o", shared, object, "-lm"};
  return runSystemCompiler(op->getLoc(), args, "linking " + shared);
}

/// Fills the digits of kernels.so's checksum in `manifest` (written as
/// zeros, which the manifest hash the kernels carry reads them as).
static LogicalResult recordHostSharedChecksum(Operation *op, StringRef shared,
                                              std::string &manifest) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bytes =
      llvm::MemoryBuffer::getFile(shared, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!bytes)
    return op->emitError("cannot read ")
           << shared << ": " << bytes.getError().message();
  size_t digits = findHostSharedChecksum(manifest);
  if (digits == std::string::npos)
    return op->emitError("internal error: the manifest has no ")
           << manifest::key::HostSharedFnv1a << " field";
  manifest.replace(digits, kHostSharedChecksumDigits,
                   formatHostSharedChecksum(fnv1a64((*bytes)->getBuffer())));
  return success();
}

/// The kernels of `host`, in emission (plan) order.
static SmallVector<LoweredKernel> getLoweredKernels(ModuleOp host) {
  SmallVector<LoweredKernel> kernels;
  for (Operation &op : host.getBody()->getOperations())
    if (std::optional<LoweredKernel> kernel = getLoweredKernel(&op))
      kernels.push_back(std::move(*kernel));
  return kernels;
}

/// The PTX text per chip of `binary`.
static FailureOr<SmallVector<std::pair<std::string, std::string>>>
getPTX(gpu::BinaryOp binary) {
  SmallVector<std::pair<std::string, std::string>> ptx;
  for (auto object : binary.getObjects().getAsRange<gpu::ObjectAttr>()) {
    auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
    if (!target || object.getFormat() != gpu::CompilationTarget::Assembly)
      return binary.emitError("expected PTX objects for NVVM targets");
    ptx.emplace_back(target.getChip().str(), object.getObject().str());
  }
  return ptx;
}

/// Declares `hash` as the exported constant the runtime checks
/// (kvq/ABI/ManifestBinding.h) in the LLVM-dialect module `host`.
static void addManifestHash(ModuleOp host, CacheOp cache, uint64_t hash) {
  OpBuilder b = OpBuilder::atBlockEnd(host.getBody());
  Type i64 = b.getI64Type();
  LLVM::GlobalOp::create(b, cache.getLoc(), i64, /*isConstant=*/true,
                         LLVM::Linkage::External,
                         getManifestHashSymbol(cache.getSymName().str()),
                         b.getIntegerAttr(i64, hash));
}

/// Writes the artifact of `cache` into `dir`. The manifest is built first:
/// the kernels carry the hash of its exact bytes.
static LogicalResult writeCacheArtifact(ModuleOp compiled, CacheOp cache,
                                        StringRef dir) {
  FailureOr<CacheLayout> layout = getCacheLayout(cache);
  if (failed(layout))
    return failure();
  auto host = dyn_cast_or_null<ModuleOp>(
      SymbolTable::lookupSymbolIn(compiled, getHostModuleName(cache)));
  auto binary = dyn_cast_or_null<gpu::BinaryOp>(
      SymbolTable::lookupSymbolIn(compiled, getDeviceModuleName(cache)));
  auto hostCpu =
      host ? host->getAttrOfType<StringAttr>("kvq.host_cpu") : StringAttr();
  if (!host || !binary || !hostCpu)
    return cache.emitError("no compiled kernels for this cache (the artifact "
                           "writer reads the output of kvq-compile-pipeline)");
  FailureOr<HostTarget> target = resolveHostTarget(host, hostCpu);
  FailureOr<SmallVector<std::pair<std::string, std::string>>> ptx =
      getPTX(binary);
  if (failed(target) || failed(ptx))
    return failure();
  // LLVM cannot select vpdpwssd for a CPU without it (it aborts).
  DotUnitAttr dot = getCacheTarget(cache).getCpuDot();
  if (dot && dot != getHostDotUnit(cache.getContext(), *target,
                                   dot.getOperands().getIntOrFloatBitWidth()))
    return cache.emitError("kvq.target has cpu_dot ")
           << dot << ", but host CPU '" << target->cpu
           << "' has no such instruction";
  SmallVector<std::string> chips;
  for (auto &[chip, text] : *ptx)
    chips.push_back(chip);
  std::string manifest;
  llvm::raw_string_ostream(manifest)
      << llvm::formatv("{0:2}",
                       describeCache(cache, *layout, getLoweredKernels(host),
                                     chips, *target))
      << "\n";
  uint64_t hash = hashManifest(manifest);
  addManifestHash(host, cache, hash);
  FailureOr<std::string> object = compileToHostObject(host, *target);
  if (failed(object))
    return failure();

  if (std::error_code error = llvm::sys::fs::create_directories(dir))
    return cache.emitError("cannot create ") << dir << ": " << error.message();
  auto path = [&](StringRef name) {
    SmallString<256> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result);
  };
  std::string hashDeclaration =
      formatPTXManifestHash(cache.getSymName().str(), hash);
  for (auto &[chip, text] : *ptx)
    if (failed(writeFile(cache, path("kernels." + chip + ".ptx"),
                         text + "\n" + hashDeclaration)))
      return failure();
  if (failed(writeFile(cache, path("kernels.o"), *object)) ||
      failed(linkSharedObject(cache, path("kernels.o"), path("kernels.so"))) ||
      failed(recordHostSharedChecksum(cache, path("kernels.so"), manifest)) ||
      failed(writeFile(cache, path(manifest::kFileName), manifest)))
    return failure();
  return success();
}

LogicalResult kvq::writeArtifact(ModuleOp compiled, StringRef dir) {
  // The pipeline may have run without the verifier between its passes.
  if (failed(verify(compiled)))
    return failure();
  auto caches = llvm::to_vector(compiled.getOps<CacheOp>());
  for (CacheOp cache : caches) {
    SmallString<256> path(dir);
    if (caches.size() > 1)
      llvm::sys::path::append(path, cache.getSymName());
    if (failed(writeCacheArtifact(compiled, cache, path)))
      return failure();
  }
  return success();
}

LogicalResult kvq::compileArtifact(ModuleOp module, StringRef dir,
                                   const KVQCompilePipelineOptions &options) {
  PassManager pm(module.getContext());
  // Verified once, by writeArtifact (docs/Rationale.md, "Verification").
  pm.enableVerifier(false);
  buildKVQCompilePipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  return writeArtifact(module, dir);
}
