//===- Kernels.h - the kernels of a compiled cache --------------*- C++ -*-===//
//
// Each kernel of docs/KernelABI.md is described once, as the program of one
// block, and emitted through a KernelTarget for every backend.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_KERNELS_H
#define KVQ_CODEGEN_KERNELS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Layout.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <limits>
#include <string>

namespace kvq {

/// The kernel kinds of kvq/ABI/KernelABI.h.
using KernelKind = abi::KernelKind;

/// One kernel to emit: what it computes and for which layers' schemes.
struct KernelSpec {
  std::string name;
  KernelKind kind;
  /// The layers the kernel serves, in increasing order (layers with
  /// identical schemes share one kernel); the first one's schemes are all
  /// of theirs.
  llvm::SmallVector<int64_t> layers;
  /// Flush kernels: keys or values.
  bool isKeys = true;
  /// Attend kernels: the forms of the target being emitted for
  /// (kvq-select-forms).
  AttendFormsAttr forms;

  llvm::SmallVector<ArgKind> getArgs() const;
  llvm::StringRef getKindName() const;
};

/// The layers of a kernel being emitted and, at run time, which of them a
/// launch serves: `row` (i32, the `tableRow` argument) is its index in
/// `layers`. What differs between the layers (their channel tables) is
/// looked up by it.
struct KernelLayers {
  llvm::ArrayRef<int64_t> layers;
  mlir::Value row;

  unsigned first() const { return unsigned(layers.front()); }
};

/// Declares the kernels of `cache` (kvq.*_kernel ops after it): one per
/// distinct scheme, each listing the layers it serves.
void planKernels(CacheOp cache, const CacheLayout &layout, mlir::OpBuilder &b);

/// The kernel a kernel op declares.
KernelSpec getKernelSpec(mlir::Operation *kernelOp);

/// What a lowered kernel function keeps of its kernel op, in its
/// `kvq.kernel` attribute: the artifact writer reads it once the op is gone.
struct LoweredKernel {
  KernelSpec spec;
  /// Flush kernels: the flush units a block of the GPU kernel moves
  /// (getFlushUnits; the CPU's move one).
  unsigned deviceUnits = 1;
};

/// The `kvq.kernel` attribute for the functions of kernel op `kernelOp`.
mlir::NamedAttribute getLoweredKernelAttr(mlir::Operation *kernelOp);

/// The kernel a function lowered from a kernel op implements; nullopt for
/// any other function.
std::optional<LoweredKernel> getLoweredKernel(mlir::Operation *func);

/// The modules kvq-lower-kernels puts the kernels of `cache` in:
/// `builtin.module @<cache>_host` and `gpu.module @<cache>_kernels`, and
/// `builtin.module @<cache>_program` for the kernels it builds as one
/// program for both targets (kvq-instantiate-programs lowers them into the
/// other two).
std::string getHostModuleName(CacheOp cache);
std::string getDeviceModuleName(CacheOp cache);
std::string getProgramModuleName(CacheOp cache);

/// The cache whose kernels `module` (one of the modules above) holds: its
/// `kvq.cache` attribute, looked up in `top`. Null where the module names
/// none; failure, with an error at the module, where the name is no cache.
mlir::FailureOr<CacheOp> getKernelModuleCache(mlir::ModuleOp top,
                                              mlir::Operation *module);

/// The lanes of a vector over `count` elements for `target`: the largest
/// power of two up to its vector lanes dividing `count`.
unsigned getLanes(const TargetInfo &info, unsigned count);
inline unsigned getLanes(const KernelTarget &target, unsigned count) {
  return getLanes(target.getInfo(), count);
}

/// The units of work (flush units) a block of a target with `info` takes
/// when a unit has `tasks` tasks its threads share: as many as give each
/// thread loadsInFlight tasks (on the GPU a unit of a span=channels value
/// flush is a token's few groups, and a block of one unit left most of its
/// threads idle); 1 on the CPU.
unsigned getBlockUnits(const TargetInfo &info, unsigned tasks);

/// A split's row of the attend kernel's `partial` output ([D + 2] f32
/// slots): m and l as f32, then the D outputs normalised by l, from byte 8,
/// in `getPartialOutputType`: f16 for f16 models (a convex combination of
/// f16 values fits f16; FlashInfer keeps its split outputs in the output
/// dtype too), else f32. getPartialOutputs: the address of the outputs of
/// the row whose first f32 slot is `row`.
mlir::Type getPartialOutputType(const CacheLayout &layout,
                                mlir::MLIRContext *ctx);
mlir::Value getPartialOutputs(KernelBuilder &kb, mlir::Value partial,
                              mlir::Value row);
/// The arithmetic of flash-decoding splits (SplitMerge.cpp), one builder for
/// the emitted kernels and the attend program. The splits' maximum M
/// starts at the lowest finite float, so that an empty split (m = -inf,
/// l = 0) weighs 0 with no test; weighSplit: w_s = 2^(m_s - M) l_s, m_s and
/// l_s built by `score` then `sum`; mergeOutputs: sum_s w_s o_s / sum_s w_s
/// (`weighted` a value or a vector), 0 where no split has a weight;
/// inverseOrZero: 1 / l, 0 for an empty split.
constexpr float kLowestSplitMax = -std::numeric_limits<float>::max();
mlir::Value weighSplit(KernelBuilder &kb, mlir::Value maxScore,
                       llvm::function_ref<mlir::Value()> score,
                       llvm::function_ref<mlir::Value()> sum);
mlir::Value mergeOutputs(KernelBuilder &kb, mlir::Value weighted,
                         mlir::Value total);
mlir::Value inverseOrZero(KernelBuilder &kb, mlir::Value l);
/// Merges the `numSplits` partial rows of each of the `rows` output rows
/// from `firstRow` (b * Hq + hq) into their D f32 outputs at `out`
/// (SplitMerge.cpp).
void mergeSplits(KernelBuilder &kb, const CacheLayout &layout,
                 mlir::Value partial, mlir::Value out, mlir::Value numSplits,
                 mlir::Value firstRow, unsigned rows);

/// The most query heads one pass over the tokens serves: each has a dot
/// product and an output accumulator in registers.
constexpr unsigned kMaxTileHeads = 8;

/// The largest divisor of `ratio` not above kMaxTileHeads, so that tiles are
/// whole and no head needs a bounds check.
inline unsigned getAttendTileHeads(unsigned ratio) {
  unsigned heads = std::min(ratio, kMaxTileHeads);
  while (ratio % heads != 0)
    --heads;
  return heads;
}

/// Emits kernel `spec` of `layout` (an attend kernel) through `target`.
void emitKernel(const KernelSpec &spec, const CacheLayout &layout,
                KernelTarget &target, mlir::OpBuilder &b, mlir::Location loc);

/// The memref and indices of a kernel program's `memref.load` or
/// `memref.store`; a null memref for any other op.
std::pair<mlir::Value, mlir::ValueRange> getMemRefAccess(mlir::Operation *op);
/// N for a kernel program's 1-D `scf.parallel` over [0, N) in steps of 1,
/// with no results (or, `withReductions`, any) and N a constant; nullopt
/// for any other.
std::optional<int64_t> getParallelTripCount(mlir::Operation *parallel,
                                            bool withReductions = false);
/// The identities of the reductions of a kernel program's `scf.parallel`,
/// each the value its combiner leaves any other unchanged with (0 for a
/// sum, -inf for a maximum written as compare and select); nullopt unless
/// every reduction is of a scalar integer or float and its combiner is one
/// op of the arithmetic (sum, product, minimum, maximum, and, or) on its
/// two arguments. The targets' forms of a parallel reduction start each
/// lane's or thread's share from it, then combine the shares and the loop's
/// initial value.
std::optional<llvm::SmallVector<mlir::TypedAttr>>
getReductionIdentities(mlir::Operation *parallel);
/// `combiner` (an scf.reduce region's block) applied to `x` and `y`: its
/// ops cloned at `b`.
mlir::Value combineByReduction(mlir::OpBuilder &b, mlir::Block &combiner,
                               mlir::Value x, mlir::Value y);
/// Clones the body of the kernel program's 1-D `loop` at `b` for the
/// iteration `mapping` gives its induction variable (but for ops whose
/// results `mapping` already has: values given for them) and returns `acc`
/// combined with the iteration's reduced values.
llvm::SmallVector<mlir::Value> cloneIteration(mlir::OpBuilder &b,
                                              mlir::scf::ParallelOp loop,
                                              mlir::IRMapping &mapping,
                                              mlir::ValueRange acc);
/// The iterations of the 1-D `loop` from `first` to its end in steps of
/// `stride`, in order, as an scf.for carrying its reductions from `inits`;
/// `outer` maps the values it reads that were cloned around it. The
/// targets' forms of a parallel loop run in one thread are such loops.
mlir::scf::ForOp buildSerialLoop(mlir::OpBuilder &b, mlir::scf::ParallelOp loop,
                                 mlir::Value first, mlir::Value stride,
                                 mlir::ValueRange inits,
                                 const mlir::IRMapping &outer = {});
/// A kernel program's 1-D parallel loop over [0, N), N a constant, no
/// parallel loop around it, whose body is arithmetic and loads (a row's
/// addresses and bounds), then one parallel loop with reductions (and no
/// parallel loop inside it), then ops
/// with no parallel loop in them (what is done with its results): a
/// reduction over tokens inside a loop over channels or heads.
struct LoopAroundReduction {
  int64_t count;
  mlir::scf::ParallelOp inner;
};
std::optional<LoopAroundReduction>
getLoopAroundReduction(mlir::scf::ParallelOp outer);
/// Whether `op` of a kernel program computes without touching memory: pure
/// ops, loops and branches (whose ops are checked one by one), and the LLVM
/// intrinsics kvq's arithmetic builder calls (fabs, sqrt, ...), which
/// declare no effects.
bool isArithmetic(mlir::Operation *op);

/// Builds key-norm kernel `spec` of `layout` as a program for both targets
/// (a `func.func` over memrefs) at `b`'s insertion point.
void buildKeyNormProgram(mlir::OpBuilder &b, mlir::Location loc,
                         const KernelSpec &spec, const CacheLayout &layout);
/// The same for the outlier-tracking kernel.
void buildTrackProgram(mlir::OpBuilder &b, mlir::Location loc,
                       const KernelSpec &spec, const CacheLayout &layout);
/// The same for a flush kernel.
void buildFlushProgram(mlir::OpBuilder &b, mlir::Location loc,
                       const KernelSpec &spec, const CacheLayout &layout);

/// Whether attend kernel `spec` of `layout` is built as a program (its
/// layers' keys and values are full-precision rows, with no outlier pool);
/// buildAttendProgram builds it (AttendProgram.cpp).
bool isAttendProgram(const KernelSpec &spec, const CacheLayout &layout);
/// The same for the attend kernels of quantized layers the program reads:
/// codes in channel order (no reorder, rotation or pre-RoPE keys), no
/// outlier pool.
bool isQuantizedAttendProgram(const KernelSpec &spec,
                              const CacheLayout &layout);
void buildAttendProgram(mlir::OpBuilder &b, mlir::Location loc,
                        const KernelSpec &spec, const CacheLayout &layout);

/// The attend kernels emitted for each target
/// (AttendKernel.cpp).
void emitAttendKernel(KernelBuilder &kb, const KernelEntry &entry,
                      const CacheLayout &layout, llvm::ArrayRef<int64_t> layers,
                      AttendFormsAttr forms);

} // namespace kvq

#endif // KVQ_CODEGEN_KERNELS_H
