// `kvq-opt --kvq-compile=DIR` runs kvq-compile-pipeline through MlirOptMain,
// so its stages print and time like any pipeline, then writes the artifact.
// A failing stage makes kvq-opt fail, and no artifact is written.
// One thread, so that the host and GPU lowerings, which otherwise run side
// by side, print one after the other.
// RUN: rm -rf %t && kvq-opt %s --kvq-compile=%t/a --mlir-print-ir-after-all --mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/a/manifest.json
// RUN: kvq-opt %s --kvq-compile=%t/b --mlir-timing -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIMING
// RUN: not kvq-opt %S/lower-kernels-errors.mlir --kvq-compile=%t/c -o /dev/null 2>&1 | FileCheck %s --check-prefix=FAIL
// RUN: not ls %t/c
// RUN: not kvq-opt %S/lower-kernels-errors.mlir --pass-pipeline='builtin.module(kvq-build-kernels)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=FAIL

kvq.cache @kivi model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// PRINT: IR Dump After KVQAssignTarget (kvq-assign-target)
// PRINT: IR Dump After KVQExpandSchedule (kvq-expand-schedule)
// PRINT: IR Dump After KVQPlanKernels (kvq-plan-kernels)
// PRINT: IR Dump After KVQLowerKernels (kvq-lower-kernels)
// PRINT: IR Dump After KVQExpandDequantize (kvq-expand-dequantize)
// PRINT: IR Dump After KVQAttachNVVMTargets (kvq-attach-nvvm-targets)
// PRINT: IR Dump After ConvertToLLVMPass (convert-to-llvm)
// PRINT: IR Dump After ConvertGpuOpsToNVVMOps (convert-gpu-to-nvvm)
// PRINT: IR Dump After KVQGpuModuleToBinary (kvq-gpu-module-to-binary)

// MANIFEST-DAG: "name": "kivi"
// MANIFEST-DAG: "attend_kernel": "kivi_attend_0"

// TIMING: Execution time report
// TIMING: KVQPlanKernels
// TIMING: KVQLowerKernels
// TIMING: ConvertToLLVMPass
// TIMING: KVQGpuModuleToBinary
// TIMING: Total

// FAIL: error: 'kvq.cache' op kvq-compile supports outlier pools only when keys and values have the same window
