//===- InstantiatePrograms.cpp - kernel programs into both targets --------===//
//
// A kernel built as a program (a `func.func` over memrefs in
// `@<cache>_program`) becomes a host function and a GPU kernel with the
// entry points of docs/KernelABI.md: each target's KernelTarget creates the
// entry and its arguments, a memref argument becomes a view of its pointer,
// block-local memory (a `memref.alloca` in the workgroup address space) a
// view of the target's, `gpu.block_id` the block's id, and the program's
// body is cloned after them. What differs between the targets beyond the entry
// (the threads a `scf.parallel` is spread over, its vectors) is left to the
// passes that follow, as patterns.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace kvq {
#define GEN_PASS_DEF_KVQINSTANTIATEPROGRAMS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// A 1-D view of `type` whose elements start at `ptr` (an `!llvm.ptr` in
/// any address space): the memref descriptor MLIR's LLVM lowering uses,
/// cast to the memref. A dynamic length (the ABI gives none) spans every
/// element a pointer can reach.
static Value viewOf(OpBuilder &b, Location loc, Value ptr, MemRefType type) {
  MLIRContext *ctx = b.getContext();
  auto generic = LLVM::LLVMPointerType::get(ctx);
  if (ptr.getType() != generic)
    ptr = LLVM::AddrSpaceCastOp::create(b, loc, generic, ptr);
  Type i64 = b.getI64Type();
  auto sizes = LLVM::LLVMArrayType::get(i64, 1);
  auto descriptor = LLVM::LLVMStructType::getLiteral(
      ctx, {generic, generic, i64, sizes, sizes});
  auto constant = [&](int64_t value) {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(value));
  };
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  Value d = LLVM::PoisonOp::create(b, loc, descriptor);
  d = LLVM::InsertValueOp::create(b, loc, d, ptr, ArrayRef<int64_t>{0});
  d = LLVM::InsertValueOp::create(b, loc, d, ptr, ArrayRef<int64_t>{1});
  d = LLVM::InsertValueOp::create(b, loc, d, constant(0), ArrayRef<int64_t>{2});
  int64_t size = type.isDynamicDim(0)
                     ? std::numeric_limits<int64_t>::max() / bytes
                     : type.getDimSize(0);
  d = LLVM::InsertValueOp::create(b, loc, d, constant(size),
                                  ArrayRef<int64_t>{3, 0});
  d = LLVM::InsertValueOp::create(b, loc, d, constant(1),
                                  ArrayRef<int64_t>{4, 0});
  return UnrealizedConversionCastOp::create(b, loc, type, d).getResult(0);
}

/// Whether `op` allocates the program's block-local memory.
static bool isBlockLocal(Operation *op) {
  auto alloca = dyn_cast<memref::AllocaOp>(op);
  return alloca && gpu::GPUDialect::isWorkgroupMemoryAddressSpace(
                       alloca.getType().getMemorySpace());
}

/// The elements per split token of block-local memory sized per split
/// (kSplitLocalAttr); nullopt for any other.
static std::optional<int64_t> getSplitLocalElements(memref::AllocaOp alloca) {
  auto perToken = alloca->getAttrOfType<IntegerAttr>(kSplitLocalAttr);
  if (!perToken)
    return std::nullopt;
  return perToken.getInt();
}

/// Fails (with a diagnostic) where `program` allocates block-local memory
/// the targets cannot: anything but a 1-D memref at its top level, static,
/// or of one dynamic size marked as sized per split token.
static LogicalResult checkBlockLocal(func::FuncOp program) {
  WalkResult result = program.walk([&](memref::AllocaOp alloca) {
    if (!isBlockLocal(alloca))
      return WalkResult::advance();
    MemRefType type = alloca.getType();
    std::optional<int64_t> perToken = getSplitLocalElements(alloca);
    bool sized = type.hasStaticShape() ? !perToken : perToken && *perToken > 0;
    if (type.getRank() == 1 && sized && type.getLayout().isIdentity() &&
        alloca->getParentOp() == program)
      return WalkResult::advance();
    alloca.emitOpError("block-local memory must be a 1-D memref allocated "
                       "at the program's top level, static or sized per "
                       "split token (")
        << kSplitLocalAttr << ")";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

/// The target's block-local memory for `alloca` (shared memory on the GPU,
/// the host function's stack on the CPU), as a view in the default memory
/// space: memory sized per split token holds the target's split capacity.
static Value allocBlockLocal(OpBuilder &b, memref::AllocaOp alloca,
                             KernelTarget &target, const CacheLayout &layout) {
  MemRefType type = alloca.getType();
  Location loc = alloca.getLoc();
  KernelBuilder kb(b, loc, target);
  int64_t count = type.hasStaticShape()
                      ? type.getNumElements()
                      : *getSplitLocalElements(alloca) *
                            int64_t(target.getSplitTokens(layout));
  unsigned bytes = type.getElementTypeBitWidth() / 8;
  Value memory = target.allocShared(kb, count * bytes);
  Value view =
      viewOf(b, loc, memory, MemRefType::get({count}, type.getElementType()));
  view.getDefiningOp()->setAttr(kBlockLocalViewAttr, b.getUnitAttr());
  // The alignment the program asked for (the targets give 16 bytes), for
  // the forms that read its rows a vector at a time.
  if (std::optional<uint64_t> alignment = alloca.getAlignment())
    view = memref::AssumeAlignmentOp::create(b, loc, view, *alignment);
  if (type.hasStaticShape())
    return view;
  return memref::CastOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), view);
}

/// The program's blocks (along x) an entry's block of `target` runs: a
/// program with `kvq.unit_tasks` (the tasks its block's threads share, a
/// flush unit's) takes getBlockUnits of them, one after another.
static unsigned getEntryUnits(func::FuncOp program, KernelTarget &target) {
  auto tasks = program->getAttrOfType<IntegerAttr>("kvq.unit_tasks");
  return tasks ? getBlockUnits(target.getInfo(), unsigned(tasks.getInt())) : 1;
}

/// Copies the `memref.global`s the kernel `body` reads (the program's
/// tables, from `program`'s module) into `kernel`'s module, once each.
static void copyGlobals(ArrayRef<Operation *> body, func::FuncOp program,
                        Operation *kernel) {
  Operation *from = program->getParentOp(), *to = kernel->getParentOp();
  OpBuilder b(to->getContext());
  for (Operation *op : body)
    op->walk([&](memref::GetGlobalOp get) {
      if (SymbolTable::lookupSymbolIn(to, get.getNameAttr()))
        return;
      Operation *global = SymbolTable::lookupSymbolIn(from, get.getNameAttr());
      b.setInsertionPoint(kernel);
      b.clone(*global);
    });
}

/// Emits `program` through `target` into its module; returns the program's
/// blocks one of the entry's runs (getEntryUnits).
static unsigned instantiate(func::FuncOp program, KernelTarget &target,
                            const CacheLayout &layout) {
  OpBuilder b(program.getContext());
  Location loc = program.getLoc();
  std::optional<LoweredKernel> kernel = getLoweredKernel(program);
  assert(kernel && "kvq-lower-kernels tags every program");
  KernelEntry entry =
      target.createKernel(b, loc, kernel->spec.name, kernel->spec.getArgs());
  Operation *func = b.getInsertionBlock()->getParentOp();
  func->setAttr("kvq.kernel", program->getAttr("kvq.kernel"));
  IRMapping mapping;
  for (auto [arg, value] : llvm::zip(program.getArguments(), entry.args)) {
    auto view = dyn_cast<MemRefType>(arg.getType());
    mapping.map(arg, view ? viewOf(b, loc, value, view) : value);
  }
  Value blockIds[3];
  for (int d = 0; d < 3; ++d)
    blockIds[d] = arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                               entry.blockId[d]);
  Block &programBlock = program.getBody().front();
  for (Operation &op : programBlock.without_terminator())
    if (isBlockLocal(&op))
      mapping.map(
          op.getResult(0),
          allocBlockLocal(b, cast<memref::AllocaOp>(op), target, layout));
  // Several of the program's blocks an entry block: program block x is
  // x * units + u for u in turn.
  unsigned units = getEntryUnits(program, target);
  Block *entryBlock = b.getInsertionBlock();
  if (units > 1) {
    auto constant = [&](int64_t value) {
      return arith::ConstantIndexOp::create(b, loc, value);
    };
    auto loop =
        scf::ForOp::create(b, loc, constant(0), constant(units), constant(1));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    blockIds[0] = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, blockIds[0], constant(units)),
        loop.getInductionVar());
  }
  SmallVector<Operation *> body;
  for (Operation &op : programBlock.without_terminator())
    if (!isBlockLocal(&op))
      body.push_back(b.clone(op, mapping));
  b.setInsertionPointToEnd(entryBlock);
  target.finishKernel(b, loc);
  copyGlobals(body, program, func);
  // The program's block is the entry's; views of block-local memory are
  // views of the target's, in the default memory space.
  for (Operation *op : body)
    op->walk([&](Operation *nested) {
      for (Value result : nested->getResults())
        if (auto type = dyn_cast<MemRefType>(result.getType());
            type && gpu::GPUDialect::isWorkgroupMemoryAddressSpace(
                        type.getMemorySpace()))
          result.setType(MemRefType::get(type.getShape(), type.getElementType(),
                                         type.getLayout()));
    });
  for (Operation *op : body)
    op->walk([&](gpu::BlockIdOp id) {
      id.replaceAllUsesWith(blockIds[static_cast<int>(id.getDimension())]);
      id.erase();
    });
  return units;
}

/// Records on host function `name` of `host` that a block of its GPU
/// kernel runs `units` program blocks (`device_units` in its kvq.kernel).
static void setDeviceUnits(ModuleOp host, StringRef name, unsigned units) {
  Operation *func = SymbolTable::lookupSymbolIn(host, name);
  MLIRContext *ctx = host.getContext();
  NamedAttrList fields(func->getAttrOfType<DictionaryAttr>("kvq.kernel"));
  fields.set("device_units",
             IntegerAttr::get(IntegerType::get(ctx, 64), units));
  func->setAttr("kvq.kernel", fields.getDictionary(ctx));
}

namespace {

struct KVQInstantiateProgramsPass
    : kvq::impl::KVQInstantiateProgramsBase<KVQInstantiateProgramsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModuleOp> programs;
    for (auto nested : module.getOps<ModuleOp>())
      if (nested->hasAttr("kvq.program"))
        programs.push_back(nested);
    for (ModuleOp program : programs) {
      if (failed(instantiateAll(module, program)))
        return signalPassFailure();
      program.erase();
    }
  }

  LogicalResult instantiateAll(ModuleOp module, ModuleOp program) {
    FailureOr<CacheOp> found = getKernelModuleCache(module, program);
    if (failed(found))
      return failure();
    CacheOp cache = *found;
    if (!cache)
      return program.emitError("kernel program names no kvq.cache");
    auto host = dyn_cast_if_present<ModuleOp>(
        SymbolTable::lookupSymbolIn(module, getHostModuleName(cache)));
    auto device = dyn_cast_if_present<gpu::GPUModuleOp>(
        SymbolTable::lookupSymbolIn(module, getDeviceModuleName(cache)));
    if (!host || !device)
      return program.emitError("kernel program of @")
             << cache.getSymName() << " has no host or GPU module to go to";
    TargetAttr target = getCacheTarget(cache);
    std::unique_ptr<KernelTarget> cpu = createCPUTarget(host, target);
    std::unique_ptr<KernelTarget> gpu = createGPUTarget(device, target);
    // The layout gives the split capacities of memory sized per split
    // token; a cache with no such memory needs none.
    bool perSplit = false;
    program.walk([&](memref::AllocaOp alloca) {
      perSplit |= getSplitLocalElements(alloca).has_value();
    });
    FailureOr<CacheLayout> layout = CacheLayout();
    if (perSplit && failed(layout = getCacheLayout(cache)))
      return failure();
    for (auto func : program.getOps<func::FuncOp>()) {
      if (!getLoweredKernel(func))
        return func.emitError("kernel program without a kvq.kernel");
      if (failed(checkBlockLocal(func)))
        return failure();
      instantiate(func, *cpu, *layout);
      // The host code runs one program block a block; the manifest takes
      // the GPU's from the host function (as for the emitted kernels).
      if (unsigned units = instantiate(func, *gpu, *layout); units > 1)
        setDeviceUnits(host, func.getName(), units);
    }
    return success();
  }
};

} // namespace
