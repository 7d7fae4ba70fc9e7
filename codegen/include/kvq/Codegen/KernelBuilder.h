//===- KernelBuilder.h - target-independent kernel emission -----*- C++ -*-===//
//
// kvq describes each kernel once, as the program of one block of a grid, and
// lowers that description to PTX and to host code. KernelBuilder emits the
// arithmetic (scf/arith/math plus LLVM pointers); KernelTarget owns what
// differs between a GPU block and a CPU block: how the block's threads share
// a loop, block-local memory, reductions, exp2 and the kernel signature.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_KERNELBUILDER_H
#define KVQ_CODEGEN_KERNELBUILDER_H

#include "kvq/ABI/KernelABI.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>
#include <functional>

namespace kvq {

class KernelBuilder;
struct CacheLayout;

/// The kinds of kernel arguments (kvq/ABI/KernelABI.h). `InPtr` points
/// to memory the kernel only reads and no other argument aliases.
using ArgKind = abi::ArgKind;

/// A kernel being built: its argument values and block ids, all i32 or
/// pointers.
struct KernelEntry {
  llvm::SmallVector<mlir::Value> args;
  mlir::Value blockId[3];
};

enum class ReduceKind { Sum, Max };

/// A half-open range of i32 indices.
struct IndexRange {
  mlir::Value begin, end;
};

/// A warp's matrix multiply-accumulate and the bit operations that feed it
/// f16 fragments: the GPU's mma.sync m16n8k16 (f16 inputs, f32 sums) from
/// sm_80. Fragments are PTX's (`groupID` = lane / 4, `threadID_in_group` =
/// lane % 4): A holds rows groupID and groupID + 8, B and C columns as the
/// PTX ISA's "Matrix fragments for mma.m16n8k16" lays them out.
class MatrixUnit {
public:
  static constexpr unsigned kM = 16, kN = 8, kK = 16;
  /// The `#kvq.mma` the matrix forms are written for: kM x kN x kK, f16
  /// operands, f32 sums.
  static MatrixUnitAttr getAttr(mlir::MLIRContext *ctx);

  virtual ~MatrixUnit();
  /// D = A B + C: `a` four and `b` two f16x2 words (i32), `c` four f32.
  virtual llvm::SmallVector<mlir::Value, 4>
  multiplyAccumulate(KernelBuilder &kb, mlir::ValueRange a, mlir::ValueRange b,
                     mlir::ValueRange c) = 0;
  /// The bytes of {hi, lo} (lo: bytes 0-3, hi: 4-7) named by the four
  /// nibbles of `selector`, byte 0 first (PTX prmt).
  virtual mlir::Value permuteBytes(KernelBuilder &kb, mlir::Value lo,
                                   mlir::Value hi, mlir::Value selector) = 0;
  /// Waits until every lane of the warp gets here: after lanes took
  /// different branches, the next multiply needs them all.
  virtual void syncWarp(KernelBuilder &kb) = 0;
  /// (x & mask) | bits, in one instruction (PTX lop3).
  virtual mlir::Value maskOr(KernelBuilder &kb, mlir::Value x, mlir::Value mask,
                             mlir::Value bits) = 0;
};

/// What the kernels and kvq-select-forms know of one backend's blocks, read
/// off `#kvq.target` in one place (getCPUTargetInfo, getGPUTargetInfo), as
/// Triton's TargetInfo is for its backends.
struct TargetInfo {
  /// The threads of a block, which share a parallelFor's iterations (1 on
  /// the CPU, whose block runs on one thread).
  unsigned blockThreads = 1;
  /// The most adjacent parallelFor iterations `sumAcrossWorkers` combines:
  /// a warp on the GPU, 1 on the CPU.
  unsigned maxWorkers = 1;
  /// The f32 lanes one thread computes on at once: a vector register on the
  /// CPU (16 with AVX-512; LLVM splits them on narrower hosts), a run of
  /// registers of one thread on the GPU. Above 1, kernels use their vector
  /// forms.
  unsigned vectorLanes = 1;
  /// Vector registers of that width.
  unsigned vectorRegisters = 1;
  /// Whether a thread's vectors are registers whose lanes one instruction
  /// shifts or permutes as a whole (the CPU's SIMD registers); on the GPU a
  /// vector is a run of scalar registers, each lane its own instruction.
  bool lanePermutes = false;
  /// Iterations of a streaming loop whose loads a thread keeps in flight
  /// at once: 1 where the core runs ahead by itself (the CPU's out-of-order
  /// window), more where a thread issues in order and waits at the first
  /// use of a load (the GPU's warps, too few of which fit on an SM to hide
  /// DRAM latency alone).
  unsigned loadsInFlight = 1;
  /// Iterations a kernel program's pipelined loop keeps in flight: that
  /// loop is unrolled by its distance, so its stages cost no moves and it
  /// can run deeper than the emitted forms' loadsInFlight.
  unsigned expandedLoadsInFlight = 1;
  /// The most 32-bit registers a thread's loads issued ahead of their use
  /// may hold in one loop: a loop whose iteration loads more keeps fewer
  /// iterations in flight (none ahead where it loads this many alone), so
  /// that the rest of the kernel keeps its values in registers.
  unsigned loadRegisters = 0;
  /// The widest load of one thread's consecutive elements, in bytes, where
  /// a thread walks a row element by element (16: PTX's ld.v4.b32); 0
  /// where rows are vectors of lanes anyway (the CPU, whose loops LLVM
  /// vectorizes).
  unsigned loadBytes = 0;
  /// Whether min/max skipping a NaN operand (llvm.minnum/maxnum) are one
  /// instruction (PTX min.f32/max.f32); x86's vminps/vmaxps are x < y ? x :
  /// y instead, and LLVM adds a NaN test and a blend to each minnum.
  bool minMaxNum = false;
  /// The units a thread (dot) or a warp (matrix) computes on; null: none.
  DotUnitAttr dot;
  MatrixUnitAttr matrix;
};

/// The vector accumulators that live across one loop: half the register
/// file, the rest for codes, weights and queries.
inline unsigned getMaxAccumulators(const TargetInfo &info) {
  return std::max(4u, info.vectorRegisters / 2);
}

/// The target-specific half of kernel emission.
class KernelTarget {
public:
  explicit KernelTarget(const TargetInfo &info) : info(info) {}
  virtual ~KernelTarget();

  const TargetInfo &getInfo() const { return info; }

  /// Creates kernel `name`, sets the builder inside it and returns its
  /// arguments and block ids. `finishKernel` closes it.
  virtual KernelEntry createKernel(mlir::OpBuilder &b, mlir::Location loc,
                                   llvm::StringRef name,
                                   llvm::ArrayRef<ArgKind> args) = 0;
  virtual void finishKernel(mlir::OpBuilder &b, mlir::Location loc) = 0;

  /// Pointer type of global memory.
  virtual mlir::Type getGlobalPtrType(mlir::MLIRContext *ctx) const = 0;

  /// Runs `body(i)` for every i32 `i` in [0, count), spread over the block's
  /// threads, then makes every write visible to the whole block.
  virtual void parallelFor(KernelBuilder &kb, mlir::Value count,
                           llvm::function_ref<void(mlir::Value)> body) = 0;
  /// parallelFor for work no thread of the block reads (prefetches): the
  /// threads go on without waiting for each other.
  virtual void
  parallelForNoWait(KernelBuilder &kb, mlir::Value count,
                    llvm::function_ref<void(mlir::Value)> body) = 0;
  /// Block-local memory of `bytes` bytes, 16-byte aligned.
  virtual mlir::Value allocShared(KernelBuilder &kb, uint64_t bytes) = 0;
  /// Reduces the `count` f32 values at `ptr` (block-local memory, written by
  /// a previous parallelFor); every thread gets the result.
  virtual mlir::Value reduce(KernelBuilder &kb, ReduceKind kind,
                             mlir::Value ptr, mlir::Value count) = 0;

  /// Updates `numSums` f32 sums of one lane for one index.
  using AccumulateStep = llvm::function_ref<llvm::SmallVector<mlir::Value>(
      mlir::Value index, mlir::Value lane, mlir::ValueRange sums)>;
  /// For every lane in [0, lanes) (lanes <= maxLanes, an i32 value): starts
  /// `numSums` sums at 0, applies each
  /// step to every index of its range in order, then calls `finish(lane,
  /// sums)`. The GPU gives each thread lanes and loops over the indices; the
  /// CPU loops over the indices and updates all lanes in an inner loop, which
  /// vectorizes over lanes.
  virtual void
  accumulate(KernelBuilder &kb, mlir::Value lanes, unsigned maxLanes,
             unsigned numSums, unsigned unroll,
             llvm::ArrayRef<std::pair<IndexRange, AccumulateStep>> steps,
             llvm::function_ref<void(mlir::Value lane, mlir::ValueRange sums)>
                 finish) = 0;

  /// 2^x in f32 for softmax weights (attention only: never codes).
  virtual mlir::Value exp2(KernelBuilder &kb, mlir::Value x) = 0;

  /// A pointer to `values`, a read-only i32 array private to the current
  /// kernel (`name` unique within it), placed in the kernel's module on
  /// first use: global memory on the GPU, a constant of the host object on
  /// the CPU.
  virtual mlir::Value getConstantTable(KernelBuilder &kb, llvm::StringRef name,
                                       llvm::ArrayRef<int32_t> values) = 0;

  /// Counts the block's arrival at the u32 counter at `counter` (global
  /// memory, zero before the first of `count` blocks arrives) and returns
  /// an i1, the same in every thread of the block: whether it is the last
  /// of them. The last one sees every global write the others made before
  /// they arrived, and sets the counter back to zero (so that a launch
  /// leaves the counters as it found them). Every thread of the block must
  /// call it.
  virtual mlir::Value arriveLast(KernelBuilder &kb, mlir::Value counter,
                                 mlir::Value count) = 0;

  /// Whether kernels should stream the next cache page in while they read
  /// one (the CPU: its prefetchers stop at 4 KiB pages, and a page's slice
  /// is random in memory); the GPU hides latency with warps instead.
  virtual bool prefetchesPages() const { return false; }
  /// Whether an attention block asks, on entry, for the quantized codes and
  /// parameters of its split that its matrix forms will read, where the
  /// launch says the grid runs in waves (the GPU: those forms wait for each
  /// step's loads, and ~16 warps an SM do not hide DRAM's latency; asked
  /// for at once, the later steps find them in the L2).
  virtual bool prefetchesSplits() const { return false; }
  /// Asks for the `lines` 64-byte lines from `ptr` + `byteOffset`.
  void prefetch(KernelBuilder &kb, mlir::Value ptr, mlir::Value byteOffset,
                unsigned lines);
  /// Asks for the line that holds `address`: a hint, which faults on no
  /// address.
  virtual void prefetchLine(KernelBuilder &kb, mlir::Value address) {}

  /// `acc` + a.lo * b.lo + a.hi * b.hi in every i32 lane, the halves of a
  /// lane of `a` and `b` signed 16-bit integers (callers bound the sums):
  /// the i16 forms' instruction, only where the target's dot unit is
  /// theirs (kI16PairDots).
  virtual mlir::Value dotI16Pairs(KernelBuilder &kb, mlir::Value acc,
                                  mlir::Value a, mlir::Value b) {
    llvm_unreachable("the target has no 16-bit integer dot products");
  }

  /// TargetInfo::loadBytes: where above 0, kernels load that many bytes
  /// of a row at a time explicitly (GPU); else they leave vectorization to
  /// LLVM's loop vectorizer (CPU).
  unsigned getLoadBytes() const { return info.loadBytes; }
  /// Iterations of a streaming loop (tokens, chunks of a row) emitted
  /// together so that their loads are in flight at once.
  unsigned getLoadsInFlight() const { return info.loadsInFlight; }

  /// The most tokens one attention block covers on this target (the
  /// capacity of its score buffer; the runtime plans splits up to it):
  /// the layout's splitTokens or hostSplitTokens.
  virtual unsigned getSplitTokens(const CacheLayout &layout) const = 0;

  /// TargetInfo's fields.
  unsigned getVectorLanes() const { return info.vectorLanes; }
  unsigned getVectorRegisters() const { return info.vectorRegisters; }
  unsigned getBlockThreads() const { return info.blockThreads; }
  unsigned getMaxWorkers() const { return info.maxWorkers; }
  /// Combines (sum or max) each of `values` (f32 scalars or vectors) over
  /// every aligned group of `workers` (a power of two, at most
  /// getMaxWorkers()) adjacent iterations of the enclosing parallelFor;
  /// every member gets the results. Every iteration of a warp must reach
  /// it: callers pad their iteration count with getWorkerIterations.
  virtual llvm::SmallVector<mlir::Value>
  reduceAcrossWorkers(KernelBuilder &kb, ReduceKind kind,
                      mlir::ValueRange values, unsigned workers) = 0;
  llvm::SmallVector<mlir::Value> sumAcrossWorkers(KernelBuilder &kb,
                                                  mlir::ValueRange values,
                                                  unsigned workers) {
    return reduceAcrossWorkers(kb, ReduceKind::Sum, values, workers);
  }
  /// The instructions of the warp's matrix unit, or null: the matrix forms
  /// use them, which kvq-select-forms picks only where TargetInfo::matrix is
  /// MatrixUnit::getAttr().
  virtual MatrixUnit *getMatrixUnit() { return nullptr; }
  /// What the iterations of tasks of `workers` workers each are padded to,
  /// so that no warp is left partly inside the loop.
  unsigned getWorkerAlignment(unsigned workers) const {
    return workers > 1 ? getMaxWorkers() : 1;
  }
  /// The iterations for `tasks` tasks of `workers` workers each, padded.
  unsigned getWorkerIterations(unsigned tasks, unsigned workers) const {
    unsigned count = tasks * workers, align = getWorkerAlignment(workers);
    return (count + align - 1) / align * align;
  }

private:
  TargetInfo info;
};

/// Emission helpers shared by every kernel and target. Integers are i32
/// unless named otherwise; byte offsets are i64.
class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc, KernelTarget &target)
      : b(b), loc(loc), target(&target) {}
  /// A builder for arithmetic only (no target-specific structure).
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc)
      : b(b), loc(loc), target(nullptr) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location getLoc() const { return loc; }
  KernelTarget &getTarget() {
    assert(target && "arithmetic-only builder has no target");
    return *target;
  }

  /// The lanes of the values being computed: 0 for scalars. Code that
  /// computes per element (Quantizer) takes its constants from c*(), so the
  /// same builder computes one group or a vector of groups, lane by lane.
  void setLanes(unsigned count) { lanes = count; }
  unsigned getLanes() const { return lanes; }
  /// `element` as a vector of getLanes() lanes, or itself for scalars.
  mlir::Type shaped(mlir::Type element);
  mlir::Value ci1(bool value);
  mlir::Value ci32(int64_t value);
  mlir::Value cf32(double value);
  mlir::Value cf64(double value);

  // Constants.
  mlir::Value i1(bool value);
  mlir::Value i32(int64_t value);
  mlir::Value i64(int64_t value);
  mlir::Value f32(double value);
  mlir::Value f64(double value);

  // Integer arithmetic (i32 or i64, matching operands).
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value divU(mlir::Value x, mlir::Value y);
  mlir::Value remU(mlir::Value x, mlir::Value y);
  mlir::Value minU(mlir::Value x, mlir::Value y);
  mlir::Value maxS(mlir::Value x, mlir::Value y);
  mlir::Value shl(mlir::Value x, mlir::Value y);
  mlir::Value shrU(mlir::Value x, mlir::Value y);
  mlir::Value bitAnd(mlir::Value x, mlir::Value y);
  mlir::Value bitOr(mlir::Value x, mlir::Value y);
  mlir::Value ult(mlir::Value x, mlir::Value y);
  mlir::Value eq(mlir::Value x, mlir::Value y);
  mlir::Value toI64(mlir::Value x);
  mlir::Value toI32(mlir::Value x);
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y);

  // Float arithmetic, IEEE fp32 with one rounding per operation.
  mlir::Value fadd(mlir::Value x, mlir::Value y);
  mlir::Value fsub(mlir::Value x, mlir::Value y);
  mlir::Value fmul(mlir::Value x, mlir::Value y);
  mlir::Value fdiv(mlir::Value x, mlir::Value y);
  mlir::Value fmin(mlir::Value x, mlir::Value y);
  mlir::Value fmax(mlir::Value x, mlir::Value y);
  /// x > y ? x : y and x < y ? x : y: y where either is NaN, so a NaN x
  /// leaves an accumulator y as fmin/fmax would. One instruction on x86
  /// (vmaxps/vminps share the rule), where llvm.maxnum needs a NaN check
  /// and blend; for the CPU's vector forms.
  mlir::Value selectMax(mlir::Value x, mlir::Value y);
  mlir::Value selectMin(mlir::Value x, mlir::Value y);
  /// A running extremum: `acc`, never NaN, updated with `x`, a NaN `x`
  /// skipped. fmin/fmax where the target has them as one instruction, else
  /// (and in a kernel program, which knows no target: kvq-running-extrema
  /// picks the form there) selectMin/selectMax(x, acc): the same result
  /// either way.
  mlir::Value runningMin(mlir::Value acc, mlir::Value x);
  mlir::Value runningMax(mlir::Value acc, mlir::Value x);
  mlir::Value fabs(mlir::Value x);
  mlir::Value fneg(mlir::Value x);
  mlir::Value sqrt(mlir::Value x);
  mlir::Value roundEven(mlir::Value x);
  /// 2^x through the target (attention only: never codes); `math.exp2`
  /// for a builder of no target (a kernel program: kvq-expand-math makes
  /// it each target's).
  mlir::Value exp2(mlir::Value x);
  mlir::Value floor(mlir::Value x);
  /// A call of LLVM intrinsic `name` returning the type of its first operand.
  mlir::Value callIntrinsic(llvm::StringRef name, mlir::ValueRange operands);
  mlir::Value feq(mlir::Value x, mlir::Value y);
  mlir::Value flt(mlir::Value x, mlir::Value y);
  /// Whether `x` (f32, scalar or vector) is a NaN or an infinity, lane by
  /// lane: |x| >= inf or unordered.
  mlir::Value isNonFinite(mlir::Value x);
  /// Whether any lane of an i1 vector is set (an i1 scalar: itself).
  mlir::Value anyLane(mlir::Value mask);
  /// Integer to f32 conversions keep the shape (scalar or vector) of `x`.
  mlir::Value uitofp(mlir::Value x);
  mlir::Value sitofp(mlir::Value x);
  mlir::Value fptosi(mlir::Value x);
  mlir::Value extF64(mlir::Value x);
  mlir::Value bitcast(mlir::Type type, mlir::Value x);

  // Vectors (1-D): what the CPU kernels compute on; LLVM maps them onto the
  // host's vector registers (AVX-512: 16 f32 lanes).
  /// `scalar` in every one of `lanes` lanes.
  mlir::Value splat(mlir::Value scalar, unsigned lanes);
  /// Constants in the shape (scalar or vector) of `like`.
  mlir::Value f32Like(mlir::Value like, double value);
  mlir::Value i32Like(mlir::Value like, int64_t value);
  /// A constant vector of i32 values.
  mlir::Value vectorI32(llvm::ArrayRef<int32_t> values);
  /// Lane j of the result is lane mask[j] of `vector`.
  mlir::Value shuffle(mlir::Value vector, llvm::ArrayRef<int64_t> mask);
  /// The 1-D `vectors` (one element type) one after another, as one vector.
  mlir::Value concat(llvm::ArrayRef<mlir::Value> vectors);
  /// The sum of the lanes of an f32 vector (reassociated: attention only).
  mlir::Value reduceAdd(mlir::Value vector);
  /// The largest lane of an f32 vector whose lanes are never NaN (the
  /// magnitudes of finite products, softmax weights). `nnan` lets LLVM
  /// reduce by a shuffle tree; maxNum's NaN rule alone is a serial chain of
  /// NaN-checked scalar maxima on x86 (45 instructions for 16 lanes).
  mlir::Value reduceMax(mlir::Value vector);
  /// The smallest lane of an f32 vector whose lanes are never NaN.
  mlir::Value reduceMin(mlir::Value vector);
  /// Combines the lanes of each of `vectors` (of one width; a power of two
  /// of them, at most its lanes: combinesEach) with `combine`, associative
  /// and commutative: lane i of the result (a scalar for one vector) is
  /// vector i's. Pairs of vectors are folded into one (each vector's runs
  /// of lanes halved, low half against high half) until one vector holds a
  /// run of every input, then each run is folded in place: 2 shuffles and
  /// one op per fold, where a reduction per vector would take log2(lanes)
  /// of each.
  mlir::Value combineEach(
      llvm::ArrayRef<mlir::Value> vectors,
      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);
  /// Lane r * n + i of the result is lane picks[r] of vectors[i], for n
  /// vectors (a power of two): a tree of two-source shuffles.
  mlir::Value gatherLanes(llvm::ArrayRef<mlir::Value> vectors,
                          llvm::ArrayRef<int64_t> picks);
  /// The first stage of combineEach: `vectors` folded pairwise into one,
  /// whose run r of lanes / count lanes holds vector r's lanes, lane i of
  /// a run combining the input's lanes i, i + run, i + 2 * run, ...
  mlir::Value combineVectors(
      llvm::ArrayRef<mlir::Value> vectors,
      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);
  /// Folds each run of `run` lanes of `all` in place (its high half into
  /// its low half, halving) down to `downTo` lanes: lane i < downTo of a
  /// run then combines its lanes i, i + downTo, i + 2 * downTo, ...; the
  /// other lanes are left partial.
  mlir::Value
  foldRuns(mlir::Value all, int64_t run, int64_t downTo,
           llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);
  static bool combinesEach(unsigned count, unsigned lanes) {
    return llvm::isPowerOf2_32(count) && count <= lanes;
  }
  /// Stores the lanes of `value` whose i1 `mask` lane is set; the others'
  /// addresses are not accessed.
  void maskedStore(mlir::Value value, mlir::Value ptr, mlir::Value byteOffset,
                   mlir::Value mask, unsigned align);
  /// Loads the lanes of a vector of `type` whose i1 `mask` lane is set, the
  /// others zero; their addresses are not accessed.
  mlir::Value maskedLoad(mlir::VectorType type, mlir::Value ptr,
                         mlir::Value byteOffset, mlir::Value mask,
                         unsigned align);

  // Memory through LLVM pointers.
  mlir::Value gep(mlir::Value ptr, mlir::Value byteOffset);
  /// `invariant`: the memory is not written while the kernel runs (kernel
  /// inputs), which lets the GPU read it through the non-coherent cache.
  mlir::Value load(mlir::Type type, mlir::Value ptr, mlir::Value byteOffset,
                   unsigned align, bool invariant = false);
  void store(mlir::Value value, mlir::Value ptr, mlir::Value byteOffset,
             unsigned align);
  /// Atomically adds the i32 `increment` to the u32 at `ptr + byteOffset`
  /// and returns the value it replaced (relaxed ordering unless told).
  mlir::Value atomicAddU32(mlir::Value ptr, mlir::Value byteOffset,
                           mlir::Value increment,
                           mlir::LLVM::AtomicOrdering ordering =
                               mlir::LLVM::AtomicOrdering::monotonic);
  /// Loads element `index` of an array of f16/bf16/f32 values as f32.
  mlir::Value loadFloat(mlir::Type elementType, mlir::Value ptr,
                        mlir::Value index, bool invariant = false);
  mlir::Value loadF32(mlir::Value ptr, mlir::Value index,
                      bool invariant = false);
  void storeF32(mlir::Value value, mlir::Value ptr, mlir::Value index);
  mlir::Value loadU32(mlir::Value ptr, mlir::Value index,
                      bool invariant = false);
  /// Loads the 16 bytes of f16/bf16/f32 elements at `index` (16-byte
  /// aligned) with one 128-bit load, as f32 values.
  llvm::SmallVector<mlir::Value, 8>
  loadFloats16B(mlir::Type elementType, mlir::Value ptr, mlir::Value index);
  /// Loads `lanes` consecutive f16/bf16/f32 elements from element `index`
  /// as a vector of f32 (one vector load, aligned to `align` bytes: one
  /// element unless given).
  mlir::Value loadFloatVector(mlir::Type elementType, mlir::Value ptr,
                              mlir::Value index, unsigned lanes,
                              bool invariant = false, unsigned align = 0);
  /// Loads 4 consecutive i32 words with one 128-bit load (16-byte aligned).
  llvm::SmallVector<mlir::Value, 4> loadWords4(mlir::Value ptr,
                                               mlir::Value byteOffset);
  /// The address of the constant i32 array `name` holding `values` in
  /// address space `space` of the module `symbolTable`, created there
  /// unless it exists (targets implement getConstantTable with it).
  mlir::Value getGlobalTable(mlir::Operation *symbolTable, llvm::StringRef name,
                             llvm::ArrayRef<int32_t> values, unsigned space);

  /// Float arithmetic of attention may be reassociated and contracted (its
  /// results have a tolerance); quantization never is (its codes are exact).
  void setReassociate(bool enable) { reassociate = enable; }
  bool getReassociate() const { return reassociate; }

  // Structured control flow.
  using LoopBody = std::function<llvm::SmallVector<mlir::Value>(
      mlir::Value iv, mlir::ValueRange iterArgs)>;
  llvm::SmallVector<mlir::Value> forLoop(mlir::Value lb, mlir::Value ub,
                                         mlir::Value step,
                                         mlir::ValueRange init,
                                         const LoopBody &body);
  /// forLoop over begin, begin + stride, ... below `end`: `batchBody` on
  /// the first of `batch` of these indices while the last of them is below
  /// `end`, then `body` on each of the rest.
  llvm::SmallVector<mlir::Value>
  forLoopBatched(mlir::Value begin, mlir::Value end, unsigned stride,
                 unsigned batch, mlir::ValueRange init,
                 const LoopBody &batchBody, const LoopBody &body);
  /// forLoop over begin, begin + stride, ... below `end`, its body emitted
  /// getTarget().getLoadsInFlight() times an iteration (then once per
  /// index for the rest), so that the loads of several indices are issued
  /// before the first of them is used.
  llvm::SmallVector<mlir::Value>
  forLoopInFlight(mlir::Value begin, mlir::Value end, unsigned stride,
                  mlir::ValueRange init, const LoopBody &body);
  /// A loop without loop-carried values.
  void forEach(mlir::Value lb, mlir::Value ub,
               llvm::function_ref<void(mlir::Value)> body);
  void ifThen(mlir::Value cond, llvm::function_ref<void()> thenBody);
  llvm::SmallVector<mlir::Value>
  ifThenElse(mlir::Value cond, mlir::TypeRange types,
             llvm::function_ref<llvm::SmallVector<mlir::Value>()> thenBody,
             llvm::function_ref<llvm::SmallVector<mlir::Value>()> elseBody);

private:
  mlir::arith::FastMathFlagsAttr getFastMath();

  mlir::OpBuilder &b;
  mlir::Location loc;
  KernelTarget *target;
  bool reassociate = false;
  unsigned lanes = 0;
};

} // namespace kvq

#endif // KVQ_CODEGEN_KERNELBUILDER_H
