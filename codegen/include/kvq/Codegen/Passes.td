//===- Passes.td - kvq code generation passes --------------*- tablegen -*-===//

#ifndef KVQ_CODEGEN_PASSES_TD
#define KVQ_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KVQAssignTarget : Pass<"kvq-assign-target", "::mlir::ModuleOp"> {
  let summary = "Attach the compilation target to every kvq.cache";
  let description = [{
    Attaches `kvq.target = #kvq.target<...>` to each `kvq.cache` that has
    none: the host CPU and GPU chips of the options, kvq's warp, block
    and split sizes, and the host's integer dot unit (`cpu_dot`) with
    factors of `dot-factor-bits`. The layout (split size), the GPU kernels (warp size,
    block threads), the host code (CPU) and the manifest read it; a cache
    without one gets the defaults.
  }];
  let options = [
    Option<"hostCpu", "host-cpu", "std::string", /*default=*/"\"native\"",
           "CPU the host code is compiled for: native, or an LLVM CPU name">,
    ListOption<"chips", "chips", "std::string",
               "GPU chips to emit PTX for (default: sm_80,sm_90)">,
    Option<"dotFactorBits", "dot-factor-bits", "unsigned", /*default=*/"16",
           "Bits of the factors of the host CPU's integer dots, where it has "
           "AVX-512 VNNI: 16 (vpdpwssd) or 8 (vpdpbusd; docs/Numerics.md, "
           "\"Attention on integer dots\")">
  ];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQAttachNVVMTargets : Pass<"kvq-attach-nvvm-targets", "::mlir::ModuleOp"> {
  let summary = "Give each cache's GPU module the NVVM target of its chips";
  let description = [{
    Sets the target of every `gpu.module` that kvq-lower-kernels made for a
    cache (`kvq.cache = @name`) to `#nvvm.target<O = 3, chip = ...>` for the
    oldest chip of the cache's `kvq.target` (`TargetAttr::getPtxChip`), so
    that kvq-gpu-module-to-binary emits one PTX, which every chip of the
    target loads: the kernels are one program for all of them.
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

def KVQGpuModuleToBinary
    : Pass<"kvq-gpu-module-to-binary", "::mlir::ModuleOp"> {
  let summary = "Compile each GPU module to one gpu.binary, a kernel per "
                "thread";
  let description = [{
    What upstream `gpu-module-to-binary{format=isa}` does, with the kernels
    of a `gpu.module` compiled on the context's threads: each kernel with
    the symbols it uses is serialized by the module's targets alone, and
    its PTX joins the others' under one header, in module order, so the
    text does not depend on the number of threads. A module whose kernels
    share a symbol, or that holds anything but kernels and what they use,
    is compiled whole. The result is the same `gpu.binary @<module>` with
    one object per target.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def KVQAssignLayout : Pass<"kvq-assign-layout", "::mlir::ModuleOp"> {
  let summary = "Compute the page layout of every kvq.cache";
  let description = [{
    Attaches to each `kvq.cache` (after schedule expansion) its physical
    layout as `kvq.layout = #kvq.layout<...>`: page and slice sizes, per
    layer the offsets of codes, scales and zero-points, code sharing
    deltas, window capacity, page and split tokens (docs/KernelABI.md,
    "Page layout"). Everything after it reads the attribute. Rejects, with a
    diagnostic naming the feature, every spec the kernels do not support.
  }];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQPlanKernels : Pass<"kvq-plan-kernels", "::mlir::ModuleOp"> {
  let summary = "Declare the kernels every kvq.cache needs";
  let description = [{
    After each `kvq.cache`, adds one `kvq.flush_kernel` per distinct
    (tensor, scheme), one `kvq.attend_kernel` per distinct (key scheme,
    value scheme), a `kvq.keynorm_kernel` where keys use `key_norm` and a
    `kvq.combine_kernel`, each listing the layers it serves. Reads the
    `kvq.layout` of kvq-assign-layout.
  }];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQSelectForms : Pass<"kvq-select-forms", "::mlir::ModuleOp"> {
  let summary = "Pick the form of every loop of every attend kernel";
  let description = [{
    Sets `cpu` and `gpu` on each `kvq.attend_kernel`: the
    `#kvq.attend_forms` its key scores and value sums take on the host CPU
    and on the GPU. Each form needs a slice of a certain shape and, for the
    i16 and matrix forms, a unit of the cache's `kvq.target` (`cpu_dot`,
    `gpu_matrix`); the first whose needs are met is picked
    (docs/Rationale.md, "Forms"). Reads the `kvq.layout` of
    kvq-assign-layout.
  }];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQLowerKernels : Pass<"kvq-lower-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower kernel declarations to host functions and GPU kernels";
  let description = [{
    Replaces every kernel op by its block program, twice (an attend kernel
    in the forms kvq-select-forms recorded on it): a `func.func` host
    entry point `NAME(void **args, i32 bx, i32 by, i32 bz)` in
    `builtin.module @<cache>_host`, and a `gpu.func` kernel in
    `gpu.module @<cache>_kernels`, one pair of modules per cache. The
    arithmetic is target-independent; only the thread mapping, block-local
    memory and reductions differ. Reconstructions stay `kvq.dequantize` ops.
    Each function keeps what the manifest needs from its kernel op in a
    `kvq.kernel` attribute (kind, tensor, layers); each host module names
    its cache (`kvq.cache`) and the CPU its code is for (`kvq.host_cpu`,
    from the cache's `kvq.target`). The `kvq.cache` ops stay. Flush,
    key-norm and track kernels, and the attend kernels of full-precision
    layers (isAttendProgram), are built instead as one program for both
    targets in `builtin.module @<cache>_program` (kvq-instantiate-programs
    makes them each target's). `attend-programs=false` emits those attend
    kernels instead, for side-by-side comparison (docs/Performance.md,
    "The attend program"). `quantized-attend-programs` builds the attend
    kernels of quantized layers whose codes are in channel order
    (isQuantizedAttendProgram: no reorder, rotation, pre-RoPE keys or
    outlier pool) as the same program, each element dequantized by
    `kvq.dequantize`; it is opt-in while the targets have no patterns that
    make it as fast as the emitted forms.
  }];
  let options = [
    Option<"attendPrograms", "attend-programs", "bool", /*default=*/"true",
           "Build the attend kernels of full-precision layers as programs">,
    Option<"quantizedAttendPrograms", "quantized-attend-programs", "bool",
           /*default=*/"false",
           "Build the attend kernels of quantized layers in channel order as "
           "programs too">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def KVQInstantiatePrograms
    : Pass<"kvq-instantiate-programs", "::mlir::ModuleOp"> {
  let summary = "Emit each kernel program as a host function and a GPU kernel";
  let description = [{
    A kernel kvq-lower-kernels built as one program for both targets (a
    `func.func` over memrefs in `builtin.module @<cache>_program`) gets the
    entry points of the other kernels: each target's entry reads the
    arguments, a memref argument becomes a view of its pointer and
    `gpu.block_id` the block's id, and the program's body follows
    unchanged. The program modules are erased. The targets' forms of the
    body's `scf.parallel` loops are kvq-vectorize-parallel's (CPU) and
    kvq-distribute-parallel's (GPU).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"
  ];
}

def KVQExpandHadamard : Pass<"kvq-expand-hadamard", "::mlir::ModuleOp"> {
  let summary = "Expand kvq.hadamard into the target's form of the rotation";
  let description = [{
    Rewrites each `kvq.hadamard` with the form of its module's kvq.target,
    Rotation.cpp's arithmetic: where a block is one thread with vector
    registers (the host), a loop over the rows, each rotated in vectors of
    the target's lanes (a stage below the lane count a shuffle); elsewhere
    (the GPU, modules of no cache) one `scf.parallel` over every row's
    butterflies a stage, the signs computed from the seed's bits, which
    kvq-distribute-parallel then spreads over the block's threads.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def KVQVectorizeParallel : Pass<"kvq-vectorize-parallel", "::mlir::ModuleOp"> {
  let summary = "Run host kernels' parallel channel loops on vectors";
  let description = [{
    In each host module (a `builtin.module` naming its `kvq.cache`), rewrites each one-dimensional
    `scf.parallel` over [0, N) whose induction variable only indexes
    unit-stride memref dimensions into an `scf.for` over vectors of the
    target's lanes (the largest power of two up to its vector lanes that
    divides N): `vector.load`/`vector.store` there, the same elementwise
    ops on vectors, vectors carried by inner loops, reductions vectors of
    the lanes' shares. A reduction inside a parallel loop that is no vectors
    itself runs in order (an `scf.for`), and the loop around it is vectors
    carrying its sums, as many lanes as keep them in half the registers.
    Integer arithmetic of the induction variable is analysed across the
    lanes: what the lanes share (a quantized row's code word and group) is
    computed once from the first lane's, what differs (a code's place in
    its word) on vectors; loads at a lane stride of 1 or 2 are one vector
    load; `kvq.dequantize` of the lanes' codes runs on vectors.
    Other parallel loops are left to their sequential lowering. Then a
    `vector.load` of no power of two of elements (a group's 3 code words)
    becomes a `vector.maskedload` of the next power of two, the lanes past
    it masked off: one instruction, where LLVM inserts the elements one by
    one.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def KVQDistributeParallel
    : Pass<"kvq-distribute-parallel", "::mlir::ModuleOp"> {
  let summary = "Spread GPU kernels' parallel loops over the block's threads";
  let description = [{
    In each GPU module (naming its `kvq.cache`): drops `memref.prefetch`
    (a stream's lines a page ahead, for the host's caches: a GPU thread keeps
    its loads in flight instead, `kvq-pipeline-loads`), turns `scf.for`
    around an `scf.parallel`
    whose iterations each keep to their own elements inside out (each
    thread then runs the sequence for its elements, without a barrier per
    step), makes a parallel loop over a row's elements around a reduction
    that reads aligned rows at them take a run of loadBytes of elements an
    iteration, makes each iteration of a parallel loop of a few iterations
    around a reduction a team of a warp's threads (their shares combined by
    `gpu.shuffle xor`), runs any other one-dimensional `scf.parallel` inside
    another in order in its thread (its reductions scalars, its rows
    aligned to whole loads read the target's loadBytes at a time), then
    runs each outermost
    one-dimensional `scf.parallel` as a loop of the block's threads
    (`gpu.thread_id`, the target's block_threads) followed by `gpu.barrier`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def KVQPipelineLoads : Pass<"kvq-pipeline-loads", "::mlir::ModuleOp"> {
  let summary = "Issue the kernels' streaming loads iterations ahead";
  let description = [{
    In each host and GPU module (naming its `kvq.cache`): software-pipelines
    every innermost `scf.for` that loads from buffers it does not write,
    with upstream's scf loop pipeliner, so that those loads (and their
    addresses) run the target's `loadsInFlight` iterations ahead of the
    rest of the loop (a kernel program's loop: `expandedLoadsInFlight`),
    fewer where the loaded values would take more than the target's
    `loadRegisters` registers (none ahead below two). The GPU keeps that
    many loads in flight per thread; the CPU (1) is left as it is. The
    loads are the kernel programs' memref loads (and a GPU thread's row
    runs, `vector.load`) and the emitted kernels' pointer loads marked
    invariant; in a loop that also streams from outside the block, loads
    of the block's own memory are issued early only where a stream's
    address reads them. Dynamic trip counts are predicated; the epilogue
    is not peeled (the loop runs its original iterations, its loads of
    iterations past the end predicated), so that the body is not copied
    again: a peeled epilogue took fp16's attend kernel on sm_90 from 168
    to 255 registers. A kernel program's pipelined loop is then unrolled
    by its distance (modulo variable expansion), so that no loaded value
    moves between registers while in flight.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"
  ];
}

def KVQRunningExtrema : Pass<"kvq-running-extrema", "::mlir::ModuleOp"> {
  let summary = "Running minima and maxima as the target's min/max";
  let description = [{
    In each host and GPU module (naming its `kvq.cache`) of a target whose
    min/max skipping a NaN are one instruction (`TargetInfo::minMaxNum`:
    the GPU's `min.f32`/`max.f32`): a running extremum carried by an
    `scf.for` (an iteration argument starting at a constant that is no NaN,
    yielded as `select(cmpf olt(x, acc), x, acc)`, or `ogt` for a maximum)
    becomes `llvm.minnum(acc, x)` (`maxnum`). The accumulator is never NaN
    (the select keeps it where x is NaN, and it starts as none), and there
    minnum gives the select's result. Kernel programs write the select,
    which is one instruction on the host (vminps) and valid on every target.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KVQMoveBF16AsBits : Pass<"kvq-move-bf16-as-bits", "::mlir::ModuleOp"> {
  let summary = "bf16 loads and stores of a host module as i16";
  let description = [{
    Every `llvm.load` and `llvm.store` of bf16 values (scalars or vectors)
    moves their bits as i16, with an `llvm.bitcast` at the value. x86
    without AVX512-BF16 has no bf16 registers: LLVM's legalisation widens a
    bf16 value to f32 and rounds it back for the store, through
    `__truncsfbf2`, which Debian 12's libgcc lacks, so a full-precision
    flush of a bf16 model (a copy of rows) compiled for x86-64-v3 left a
    `kernels.so` that could not be loaded. A bitcast to and from i16 costs
    nothing and folds away where a loaded value is stored again. Runs on the
    host modules after their conversion to the LLVM dialect
    (`kvq-host-to-llvm`).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KVQExpandMath : Pass<"kvq-expand-math", "::mlir::ModuleOp"> {
  let summary = "Kernel programs' math ops as each target's arithmetic";
  let description = [{
    In each host and GPU module (naming its `kvq.cache`): `math.exp2` on f32
    or vectors of f32 becomes the target's 2^x (`KernelTarget::exp2`): on
    the host a polynomial of the fraction times the power of two of the
    rounded exponent, exact to a few ulp with no library call; on the GPU
    `llvm.exp2` (`ex2.approx.f32`). The emitted kernels call the same
    function, so a program's softmax computes what theirs does.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::vector::VectorDialect"];
}

def KVQExpandDequantize : Pass<"kvq-expand-dequantize", "::mlir::ModuleOp"> {
  let summary = "Expand kvq.dequantize into arith operations";
  let description = [{
    Rewrites each `kvq.dequantize` into the fp32 arithmetic of its scheme,
    with the same builder the quantizing kernels use.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def KVQExpandGroupDots : Pass<"kvq-expand-group-dots", "::mlir::ModuleOp"> {
  let summary = "Lower kvq.group_dot by the forms of its module's target";
  let description = [{
    Rewrites each `kvq.group_dot` with the forms of its module's
    kvq.target. Where a thread's vectors are registers of lanes (the
    host's SIMD registers, whose sum across lanes is a tree of permutes)
    and the target has 16-bit pair dots (`cpu_dot`): a loop summing all
    the group dots of a row, inside a loop over the rows that reads each
    tile's whole row unchanged (a span=channels key token against each
    head's query), runs on the pair dots, each row rounded to i16 once
    before the loop over the rows and a row's groups' codes one vector
    load (docs/Numerics.md, "Attention on integer dots"). Otherwise there,
    an `scf.parallel` whose sums are one group dot's dots carries each
    head's products with the reconstructed group, tile * (slope * codes +
    offset), as a vector, and reduces each vector once after the loop.
    Where the target has a warp's matrix unit (`gpu_matrix`): a parallel
    loop over rows whose iteration sums all the group dots of its row and
    stores each head's sum (a split's span=channels key tokens, a
    span=tokens value slice's channels) runs on `nvgpu.mma.sync`, a warp's
    tiles of 16 rows against the heads' tiles as split f16 halves, one
    iteration a thread of the block. Elsewhere
    (the GPU, a dot left over, modules of no cache): each dot a
    `vector.reduction` of the tile times the codes, the slope and the
    offset times the tile's sum applied to it.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def KVQExpandUnpack : Pass<"kvq-expand-unpack", "::mlir::ModuleOp"> {
  let summary = "Expand kvq.unpack into vector permutes and shifts";
  let description = [{
    Rewrites each `kvq.unpack` into a permute of its words to the lanes
    (`vector.shuffle`), a per-lane shift (`arith.shrui`, or `llvm.fshr`
    where a code straddles two words) and a mask. On x86 these become
    `vpermd`/`vpbroadcastd`, `vpsrlvd` or `vpshrdvd` and `vpandd`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::vector::VectorDialect"];
}

def KVQExpandPack : Pass<"kvq-expand-pack", "::mlir::ModuleOp"> {
  let summary = "Expand kvq.pack into the target's shifts and permutes";
  let description = [{
    Rewrites each `kvq.pack` with the forms of its module's kvq.target.
    Where a thread's vectors are SIMD registers (the host): every code to a
    byte and adjacent fields merged in 16-, 32- and 64-bit lanes, then a
    byte permute, where the stream is whole words of whole bytes; else
    adjacent lanes merged while two fields fit a lane. Elsewhere (the GPU,
    and modules of no cache): each code shifted into its word and ORed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // KVQ_CODEGEN_PASSES_TD
