//===- Passes.td - kvq code generation passes --------------*- tablegen -*-===//

#ifndef KVQ_CODEGEN_PASSES_TD
#define KVQ_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

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
           "Artifact directory">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::ub::UBDialect"
  ];
}

#endif // KVQ_CODEGEN_PASSES_TD
