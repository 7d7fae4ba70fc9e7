//===- Passes.h - kvq code generation passes --------------------*- C++ -*-===//

#ifndef KVQ_CODEGEN_PASSES_H
#define KVQ_CODEGEN_PASSES_H

#include "kvq/Dialect/KVQ/KVQDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kvq {

#define GEN_PASS_DECL
#include "kvq/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kvq/Codegen/Passes.h.inc"

} // namespace kvq

#endif // KVQ_CODEGEN_PASSES_H
