//===- ProgramBuilder.h - kernels built as programs over memrefs -*- C++
//-*-===//
//
// What the kernels built as one program for both targets (docs/Rationale.md,
// "The kernel program"), and the patterns that expand their ops, are made
// of. Buffers are 1-D memrefs of the ABI's element types, addressed by the
// i32 element offsets the shared addressing helpers compute; block-local
// memory is a `memref.alloca` in the GPU's workgroup address space, which
// kvq-instantiate-programs makes each target's (shared memory, the host
// function's stack); the work a block's threads share is `scf.parallel`.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_PROGRAMBUILDER_H
#define KVQ_CODEGEN_PROGRAMBUILDER_H

#include "kvq/Codegen/KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kvq {

/// The attribute of a block-local `memref.alloca` sized per token of a split
/// (ProgramBuilder::allocSplitLocal): the elements per token, an i64.
constexpr llvm::StringLiteral kSplitLocalAttr = "kvq.split_local";
/// The unit attribute kvq-instantiate-programs puts on the op whose result
/// is a target's view of block-local memory, for the passes that treat the
/// block's own memory apart from the buffers it streams.
constexpr llvm::StringLiteral kBlockLocalViewAttr = "kvq.block_local";

/// KernelBuilder's arithmetic plus the memory and structure of a program.
class ProgramBuilder : public KernelBuilder {
public:
  ProgramBuilder(mlir::OpBuilder &b, mlir::Location loc)
      : KernelBuilder(b, loc) {}

  /// A buffer argument: `memref<?xelement>`.
  static mlir::MemRefType getBufferType(mlir::Type element);
  /// An empty `func.func @name` over `args` with its entry block, in which
  /// the builder is left; the caller ends it with `func.return`.
  mlir::func::FuncOp createProgram(llvm::StringRef name,
                                   llvm::ArrayRef<mlir::Type> args);
  /// The block's id along `dim`, as an i32.
  mlir::Value getBlockId(mlir::gpu::Dimension dim = mlir::gpu::Dimension::x);

  mlir::Value index(int64_t value);
  /// An i32 (unsigned) or index value as an index.
  mlir::Value toIndex(mlir::Value value);
  /// An index (a parallel loop's induction variable) as an i32.
  mlir::Value indexToI32(mlir::Value index);
  /// `size` elements of the 1-D `buffer` from element `offset`.
  mlir::Value row(mlir::Value buffer, mlir::Value offset, int64_t size);
  /// Element `at` (i32 or index) of a 1-D memref, and the same as f32.
  mlir::Value loadElement(mlir::Value memref, mlir::Value at);
  mlir::Value loadElementAsF32(mlir::Value memref, mlir::Value at);
  /// Elements [at, at + count) of a 1-D memref of floats, as a vector of
  /// f32; `alignment`: the bytes their address is known to be aligned to
  /// (0: the element's).
  mlir::Value loadVectorAsF32(mlir::Value memref, mlir::Value at, int64_t count,
                              unsigned alignment = 0);
  /// The sum of x * y over the lanes of two f32 vectors, in any order and
  /// with fused multiply-adds (attention's dots with a tile).
  mlir::Value dot(mlir::Value x, mlir::Value y);
  /// A float, or a vector of them, as f32.
  mlir::Value asF32(mlir::Value x);
  void storeElement(mlir::Value value, mlir::Value memref, mlir::Value at);
  /// Stores the 1-D vector `value` at elements [at, at + its length).
  void storeVector(mlir::Value value, mlir::Value memref, mlir::Value at);
  /// Adds the i32 `value` to element `at` of an i32 memref, atomically.
  void atomicAdd(mlir::Value value, mlir::Value memref, mlir::Value at);
  /// `count` elements of `element` from byte `byteOffset` (i64) of the byte
  /// buffer `bytes` (a `memref<?xi8>`): a page region read as its type.
  mlir::Value view(mlir::Value bytes, mlir::Value byteOffset,
                   mlir::Type element, int64_t count);
  /// Element `index` (i32) of the read-only i32 table `name` of the
  /// program being built, whose entries `build` gives: a `memref.global` of
  /// the program's module named after the program, made on first use
  /// (kvq-instantiate-programs copies it to each target's module).
  mlir::Value
  loadConstant(llvm::StringRef name, mlir::Value index,
               llvm::function_ref<llvm::SmallVector<int32_t>()> build);
  /// `count` elements of block-local memory, every thread's view of one
  /// buffer, starting on `alignment` bytes (at most 16: the targets').
  mlir::Value allocBlockLocal(mlir::Type element, int64_t count,
                              unsigned alignment = 0);
  /// Block-local memory of `perToken` elements for each token of a split
  /// of `splitTokens` (an index) tokens, the planned split size of an
  /// attend kernel: a `memref<?xelement>` marked `kvq.split_local`, whose
  /// storage kvq-instantiate-programs sizes for the target's split capacity
  /// (KernelTarget::getSplitTokens, which bounds the plan), starting on
  /// `alignment` bytes (at most 16).
  mlir::Value allocSplitLocal(mlir::Type element, int64_t perToken,
                              mlir::Value splitTokens, unsigned alignment = 0);
  /// Runs `body(i)`, `i` an index, for every i in [0, count): the block's
  /// threads share the iterations, and what one writes the next op of the
  /// block reads.
  void parallelFor(int64_t count, llvm::function_ref<void(mlir::Value)> body);
  /// The same for `count` (an index) known at run time only.
  void parallelFor(mlir::Value count,
                   llvm::function_ref<void(mlir::Value)> body);
  /// Reduces the values `body(i)` returns for every i in [0, count) (an
  /// index), value k by `combine(k, x, y)` from `inits[k]`, in any order:
  /// an scf.parallel with one reduction a value.
  mlir::scf::ParallelOp parallelReduce(
      mlir::Value count, mlir::ValueRange inits,
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value)> body,
      llvm::function_ref<mlir::Value(unsigned, mlir::Value, mlir::Value)>
          combine);

private:
  /// The program createProgram made.
  mlir::func::FuncOp program;
};

} // namespace kvq

#endif // KVQ_CODEGEN_PROGRAMBUILDER_H
