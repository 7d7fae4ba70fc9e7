//===- Passes.td - kvq code generation passes --------------*- tablegen -*-===//

#ifndef KVQ_CODEGEN_PASSES_TD
#define KVQ_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KVQPlanKernels : Pass<"kvq-plan-kernels", "::mlir::ModuleOp"> {
  let summary = "Declare the kernels every kvq.cache needs";
  let description = [{
    After each `kvq.cache`, adds one `kvq.flush_kernel` per distinct
    (tensor, scheme), one `kvq.attend_kernel` per distinct (key scheme,
    value scheme), a `kvq.keynorm_kernel` where keys use `key_norm` and a
    `kvq.combine_kernel`, each listing the layers it serves. Rejects, with a
    diagnostic naming the feature, every spec the kernels do not support.
  }];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQLowerKernels : Pass<"kvq-lower-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower kernel declarations to functions for one target";
  let description = [{
    Replaces every kernel op by its block program: `func.func` host entry
    points `NAME(void **args, i32 bx, i32 by, i32 bz)` for `target=cpu`,
    `gpu.func` kernels in `gpu.module @kvq_kernels` for `target=gpu`. The
    arithmetic is target-independent; only the thread mapping, block-local
    memory and reductions differ. Reconstructions stay `kvq.dequantize` ops.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu or gpu">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect"
  ];
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

def KVQCompileArtifact : Pass<"kvq-compile-artifact", "::mlir::ModuleOp"> {
  let summary = "Compile every kvq.cache into an artifact directory";
  let description = [{
    Generates the kernels of each `kvq.cache` (docs/KernelABI.md), lowers them
    to PTX for sm_80 and sm_90 and to host object code, and writes the
    artifact (manifest, PTX, kernels.o, kernels.so) into `dir` (one cache) or
    `dir/<cache name>` (several). `kvq-opt --kvq-compile=DIR` runs it.
    Specs that use a feature the code generator does not support yet are
    rejected with a diagnostic naming the feature. The IR is left unchanged.
  }];
  let options = [
    Option<"dir", "dir", "std::string", /*default=*/"\"\"",
           "Artifact directory">,
    Option<"hostCpu", "host-cpu", "std::string", /*default=*/"\"native\"",
           "CPU the host code is compiled for: native, or an LLVM CPU name "
           "(x86-64-v2, x86-64-v3, skylake-avx512, ...); the manifest "
           "records it and the features the code may use">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::ub::UBDialect"
  ];
}

#endif // KVQ_CODEGEN_PASSES_TD
