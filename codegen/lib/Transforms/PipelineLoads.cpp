//===- PipelineLoads.cpp - streaming loads issued iterations ahead --------===//
//
// Software pipelining of the kernels' streaming loops, with upstream's scf
// loop pipeliner: in an innermost `scf.for`, each load from memory the loop
// does not write (a stream: keys, pool rows, a block's scratch read back)
// is issued, with the addresses it needs, `loadsInFlight` iterations
// before the rest of its iteration uses it. The loads are the kernel
// programs' memref loads (elements, and a GPU thread's runs of a row,
// `vector.load`) and the emitted kernels' pointer loads marked invariant
// (pages, windows, sinks: nothing writes them during a launch). In a loop
// that also streams from outside the block, the block's own memory is no
// stream: it answers within a few cycles, and its loads would only hold
// registers stages ahead (the attend program's query rows, 32 registers an
// iteration, kept its key rows from being pipelined at all), except where
// a stream's address reads it (a row's page from the split's pages).
// A GPU thread issues in order and stalls at the first use of a load, so
// without this it keeps one load in flight; the CPU's out-of-order core
// runs ahead by itself (its loadsInFlight is 1: nothing to do). The number
// of stages is the target's (TargetInfo::loadsInFlight, for a kernel
// program's loop expandedLoadsInFlight), fewer where an iteration's loads
// would hold more than TargetInfo::loadRegisters; these are read here and
// nowhere else for these loops. A kernel program's pipelined loop is then
// unrolled by its distance (expandModuloVariables).
//
// The loops' trip counts are dynamic (a chunk's tokens), possibly shorter
// than the distance: the prologue's loads, and the loop's loads of the
// iterations past its end, are predicated (a branch that yields zero where
// the iteration does not exist). The epilogue is not peeled: the loop runs
// the original iterations, so its body is not copied again. A peeled
// epilogue took fp16's attend kernel on sm_90 to 255 registers and KIVI-2's,
// through its long window loops, from 127 to 251 (127 now); fp16's then
// reached 255 and spilled again through one loop of 256 bytes an iteration
// kept four deep, which the register cap leaves unpipelined (159 now).
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Kernels.h"
#include "kvq/Codegen/Passes.h"
#include "kvq/Codegen/ProgramBuilder.h"
#include "kvq/Codegen/Targets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kvq {
#define GEN_PASS_DEF_KVQPIPELINELOADS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// The buffer a memref views or a pointer points into: through subviews,
/// casts and address arithmetic (GEPs) to the value that defines the memory
/// (a kernel argument, a scratch buffer).
static Value getRootBuffer(Value address) {
  while (true) {
    if (auto view = address.getDefiningOp<ViewLikeOpInterface>())
      address = view.getViewSource();
    else if (auto gep = address.getDefiningOp<LLVM::GEPOp>())
      address = gep.getBase();
    else
      return address;
  }
}

/// Whether `op` is a kernel program's load from a memref (an element, or a
/// GPU thread's run of a row, kvq-distribute-parallel), and isLoad: that or
/// an emitted kernel's pointer load.
static bool isMemRefLoad(Operation *op) {
  return isa<memref::LoadOp, vector::LoadOp>(op);
}
static bool isLoad(Operation *op) {
  return isMemRefLoad(op) || isa<LLVM::LoadOp>(op);
}

/// Whether `buffer` (a root buffer) is the block's own memory: a view
/// kvq-instantiate-programs made of the target's block-local memory.
static bool isBlockLocalMemory(Value buffer) {
  if (auto cast = buffer.getDefiningOp<memref::CastOp>())
    buffer = cast.getSource();
  Operation *view = buffer.getDefiningOp();
  return view && view->hasAttr(kBlockLocalViewAttr);
}

/// The buffer a load or store reads or writes; null for other ops.
static Value getAccessedBuffer(Operation *op) {
  if (Value memref = getMemRefAccess(op).first)
    return getRootBuffer(memref);
  if (auto load = dyn_cast<vector::LoadOp>(op))
    return getRootBuffer(load.getBase());
  if (auto store = dyn_cast<vector::MaskedStoreOp>(op))
    return getRootBuffer(store.getBase());
  if (auto load = dyn_cast<LLVM::LoadOp>(op))
    return getRootBuffer(load.getAddr());
  if (auto store = dyn_cast<LLVM::StoreOp>(op))
    return getRootBuffer(store.getAddr());
  return {};
}

/// The ops of `loop`'s body that issue its stream loads, with the address
/// arithmetic they need, in body order; empty where the loop is no
/// streaming loop: its body holds a region, a write the stage split cannot
/// move around, or no load from a buffer the loop does not write. A warp's
/// barrier (`bar.warp.sync`, after a matrix form's masked stores) stays
/// with the rest of its iteration.
static SmallVector<Operation *> getStreamIssue(scf::ForOp loop) {
  Block *body = loop.getBody();
  llvm::SmallPtrSet<Value, 4> written;
  for (Operation &op : body->without_terminator()) {
    if (op.getNumRegions())
      return {};
    if (isa<NVVM::SyncWarpOp>(op))
      continue;
    if (isa<memref::StoreOp, vector::MaskedStoreOp, LLVM::StoreOp>(op))
      written.insert(getAccessedBuffer(&op));
    else if (!isArithmetic(&op) && !isLoad(&op))
      return {};
  }
  // An op issues a stream load where it is one, or computes an operand of
  // one from the induction variable, values from outside the loop and
  // other stream loads. (Distinct buffers, the ABI's arguments and the
  // block's scratch, do not alias.) A load through a pointer streams only
  // where it is marked invariant: its emitter's word that nothing writes
  // the memory during the launch.
  llvm::SmallPtrSet<Operation *, 16> issue;
  auto isUnwrittenLoad = [&](Operation *op) {
    auto pointerLoad = dyn_cast<LLVM::LoadOp>(op);
    if (!isMemRefLoad(op) && !(pointerLoad && pointerLoad.getInvariant()))
      return false;
    return !written.contains(getAccessedBuffer(op));
  };
  // Where the loop also streams from memory outside the block (a program's
  // rows of keys beside the block's queries), only those loads are its
  // streams: the block's own memory answers within a few cycles and would
  // only hold registers stages ahead.
  bool streamsFromOutside =
      llvm::any_of(body->without_terminator(), [&](Operation &op) {
        return isMemRefLoad(&op) && isUnwrittenLoad(&op) &&
               !isBlockLocalMemory(getAccessedBuffer(&op));
      });
  auto isStreamLoad = [&](Operation *op) {
    return isUnwrittenLoad(op) && !(streamsFromOutside && isMemRefLoad(op) &&
                                    isBlockLocalMemory(getAccessedBuffer(op)));
  };
  // A stream's address may read any memory the loop does not write (a
  // block-local page table entry): that load is issued with it.
  std::function<bool(Operation *)> canIssue = [&](Operation *op) {
    if (issue.contains(op))
      return true;
    if (!isArithmetic(op) && !isUnwrittenLoad(op))
      return false;
    for (Value operand : op->getOperands()) {
      if (operand == loop.getInductionVar() ||
          !loop->isAncestor(operand.getParentBlock()->getParentOp()))
        continue;
      Operation *def = operand.getDefiningOp();
      // A loop-carried value is the previous iteration's.
      if (!def || !canIssue(def))
        return false;
    }
    return true;
  };
  for (Operation &load : body->without_terminator()) {
    if (!isStreamLoad(&load) || !canIssue(&load))
      continue;
    // Commit the load and everything it reads inside the body.
    std::function<void(Operation *)> add = [&](Operation *op) {
      if (!issue.insert(op).second)
        return;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == body)
          add(def);
    };
    add(&load);
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : body->without_terminator())
    if (issue.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// `op` (a copy of the prologue or epilogue) run only where `pred` holds;
/// null where it cannot be.
static Operation *predicate(RewriterBase &rewriter, Operation *op, Value pred) {
  if (isArithmetic(op))
    return op;
  Location loc = op->getLoc();
  rewriter.setInsertionPoint(op);
  if (isLoad(op)) {
    Type type = op->getResult(0).getType();
    auto branch = scf::IfOp::create(
        rewriter, loc, pred,
        [&](OpBuilder &b, Location) {
          scf::YieldOp::create(b, loc, b.clone(*op)->getResults());
        },
        [&](OpBuilder &b, Location) {
          Value zero = arith::ConstantOp::create(
              b, loc, cast<TypedAttr>(b.getZeroAttr(type)));
          scf::YieldOp::create(b, loc, zero);
        });
    rewriter.replaceOp(op, branch.getResults());
    return branch;
  }
  if (isa<memref::StoreOp, LLVM::StoreOp>(op)) {
    auto branch =
        scf::IfOp::create(rewriter, loc, pred, [&](OpBuilder &b, Location) {
          b.clone(*op);
          scf::YieldOp::create(b, loc);
        });
    rewriter.eraseOp(op);
    return branch;
  }
  return nullptr;
}

/// The 32-bit registers the loads among `issue` fill in one iteration.
static unsigned getLoadRegisters(ArrayRef<Operation *> issue) {
  uint64_t bits = 0;
  for (Operation *op : issue) {
    if (!isLoad(op))
      continue;
    Type type = op->getResult(0).getType();
    if (auto vector = dyn_cast<VectorType>(type))
      bits += vector.getNumElements() * vector.getElementTypeBitWidth();
    else
      bits += std::max(32u, type.getIntOrFloatBitWidth());
  }
  return unsigned(llvm::divideCeil(bits, 32));
}

/// Modulo variable expansion of a kernel program's pipelined `loop`: the
/// loop is unrolled by the `distance` its loads run ahead, so that each
/// load writes the registers its use reads, `distance` copies later. Else
/// every iteration moves each load's value one stage along, and a GPU
/// thread stalls at the first move of a value still in flight: the loads
/// would arrive one iteration ahead, not `distance` (the attend program's
/// value sums waited for every load). The emitted kernels' loops keep the
/// moves: unrolled, fp16's attend kernel took 255 registers and spilled
/// 3.5 KB on sm_90.
static LogicalResult expandModuloVariables(scf::ForOp loop, unsigned distance) {
  // Upstream's unrolling divides the bounds' difference without a sign: a
  // loop that runs no iteration must end where it starts.
  OpBuilder b(loop);
  loop.setUpperBound(arith::MaxSIOp::create(
      b, loop.getLoc(), loop.getUpperBound(), loop.getLowerBound()));
  if (succeeded(loopUnrollByFactor(loop, distance)))
    return success();
  return emitError(loop.getLoc(),
                   "kvq-pipeline-loads: cannot unroll this pipelined loop");
}

/// Pipelines `loop` with its stream loads up to `info.loadsInFlight` (a
/// kernel program's: `info.expandedLoadsInFlight`)
/// iterations ahead, as many as fit `info.loadRegisters`; leaves it as it
/// was where it is no streaming loop, where fewer than two iterations fit,
/// or where the pipeliner declines before changing it. Fails (with a
/// diagnostic) where the pipeliner failed half-way, leaving a loop that
/// cannot be compiled.
static LogicalResult pipelineLoop(scf::ForOp loop, const TargetInfo &info) {
  SmallVector<Operation *> issue = getStreamIssue(loop);
  if (issue.empty() || loop.getUnsignedCmp())
    return success();
  // A kernel program's loop is unrolled by its distance after pipelining;
  // an emitted kernel's keeps its rotation, a move per loaded register and
  // stage each iteration.
  bool isProgramLoop = llvm::any_of(issue, isMemRefLoad);
  unsigned distance =
      std::min(isProgramLoop ? info.expandedLoadsInFlight : info.loadsInFlight,
               info.loadRegisters / std::max(1u, getLoadRegisters(issue)));
  if (distance < 2)
    return success();
  llvm::SmallPtrSet<Operation *, 16> early(issue.begin(), issue.end());
  scf::PipeliningOption options;
  options.getScheduleFn =
      [&](scf::ForOp, std::vector<std::pair<Operation *, unsigned>> &schedule) {
        for (Operation *op : issue)
          schedule.emplace_back(op, 0);
        for (Operation &op : loop.getBody()->without_terminator())
          if (!early.contains(&op))
            schedule.emplace_back(&op, distance);
      };
  options.supportDynamicLoops = true;
  options.peelEpilogue = false;
  options.predicateFn = predicate;
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  bool modified = false;
  FailureOr<scf::ForOp> pipelined =
      scf::pipelineForLoop(rewriter, loop, options, &modified);
  if (succeeded(pipelined))
    return isProgramLoop ? expandModuloVariables(*pipelined, distance)
                         : success();
  if (!modified)
    return success();
  return emitError(loc, "kvq-pipeline-loads: the scf pipeliner failed after "
                        "changing this loop");
}

/// Pipelines the streaming loops of every kernel of `module`.
static LogicalResult pipelineModule(Operation *module, const TargetInfo &info) {
  if (std::max(info.loadsInFlight, info.expandedLoadsInFlight) <= 1)
    return success();
  SmallVector<scf::ForOp> loops;
  module->walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops)
    if (failed(pipelineLoop(loop, info)))
      return failure();
  return success();
}

namespace {

struct KVQPipelineLoadsPass
    : kvq::impl::KVQPipelineLoadsBase<KVQPipelineLoadsPass> {
  void runOnOperation() override {
    if (failed(forEachKernelModule(getOperation(), pipelineModule)))
      signalPassFailure();
  }
};

} // namespace
