// RUN: not kvq-opt %s --kvq-gpu-module-to-binary 2>&1 | FileCheck %s

// CHECK: error: the module has no target attributes
gpu.module @untargeted {
  llvm.func @k() attributes {gpu.kernel} {
    llvm.return
  }
}
