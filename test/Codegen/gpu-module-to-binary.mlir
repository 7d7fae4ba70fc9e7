// kvq-gpu-module-to-binary compiles each kernel of a gpu.module with the
// symbols it uses on its own (on the context's threads) and joins their
// PTX under one header; kernels sharing a symbol are compiled together.
// NVPTX numbers a function's labels by its place in its LLVM module, so a
// kernel compiled alone has labels $L__BB0_*.
// RUN: kvq-opt %s --kvq-gpu-module-to-binary | FileCheck %s
// Without threads every module is compiled whole.
// RUN: kvq-opt %s --kvq-gpu-module-to-binary --mlir-disable-threading | FileCheck %s --check-prefix=WHOLE

// CHECK-LABEL: gpu.binary @apart [#gpu.object<#nvvm.target<chip = "sm_80">
// CHECK-SAME: .version
// CHECK-NOT: .version
// CHECK-SAME: .global .align 4 .b8 table_a
// CHECK-SAME: .visible .entry a(
// CHECK-SAME: $L__BB0_2
// CHECK-SAME: .global .align 4 .b8 table_b
// CHECK-SAME: .visible .entry b(
// CHECK-SAME: $L__BB0_2
// CHECK-LABEL: gpu.binary @together
// CHECK-SAME: .visible .entry c(
// CHECK-SAME: $L__BB0_2
// CHECK-SAME: .visible .entry d(
// CHECK-SAME: $L__BB1_2
// CHECK-NOT: gpu.module

// WHOLE-LABEL: gpu.binary @apart
// WHOLE-SAME: .visible .entry a(
// WHOLE-SAME: $L__BB0_2
// WHOLE-SAME: .visible .entry b(
// WHOLE-SAME: $L__BB1_2

gpu.module @apart [#nvvm.target<chip = "sm_80">] {
  llvm.mlir.global internal constant @table_a(dense<[1, 2]> : tensor<2xi32>) {addr_space = 1 : i32} : !llvm.array<2 x i32>
  llvm.mlir.global internal constant @table_b(dense<[3, 2]> : tensor<2xi32>) {addr_space = 1 : i32} : !llvm.array<2 x i32>
  llvm.func @a(%out: !llvm.ptr<1>, %n: i32) attributes {gpu.kernel, nvvm.kernel} {
    %table = llvm.mlir.addressof @table_a : !llvm.ptr<1>
    %zero = llvm.mlir.constant(0 : i32) : i32
    %positive = llvm.icmp "sgt" %n, %zero : i32
    llvm.cond_br %positive, ^store, ^done
  ^store:
    %at = llvm.getelementptr %table[%n] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    %x = llvm.load %at : !llvm.ptr<1> -> i32
    llvm.store %x, %out : i32, !llvm.ptr<1>
    llvm.br ^done
  ^done:
    llvm.return
  }
  llvm.func @b(%out: !llvm.ptr<1>, %n: i32) attributes {gpu.kernel, nvvm.kernel} {
    %table = llvm.mlir.addressof @table_b : !llvm.ptr<1>
    %zero = llvm.mlir.constant(0 : i32) : i32
    %positive = llvm.icmp "sgt" %n, %zero : i32
    llvm.cond_br %positive, ^store, ^done
  ^store:
    %at = llvm.getelementptr %table[%n] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    %x = llvm.load %at : !llvm.ptr<1> -> i32
    llvm.store %x, %out : i32, !llvm.ptr<1>
    llvm.br ^done
  ^done:
    llvm.return
  }
}

gpu.module @together [#nvvm.target<chip = "sm_80">] {
  llvm.mlir.global internal constant @table_c(dense<[5, 2]> : tensor<2xi32>) {addr_space = 1 : i32} : !llvm.array<2 x i32>
  llvm.func @c(%out: !llvm.ptr<1>, %n: i32) attributes {gpu.kernel, nvvm.kernel} {
    %table = llvm.mlir.addressof @table_c : !llvm.ptr<1>
    %zero = llvm.mlir.constant(0 : i32) : i32
    %positive = llvm.icmp "sgt" %n, %zero : i32
    llvm.cond_br %positive, ^store, ^done
  ^store:
    %at = llvm.getelementptr %table[%n] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    %x = llvm.load %at : !llvm.ptr<1> -> i32
    llvm.store %x, %out : i32, !llvm.ptr<1>
    llvm.br ^done
  ^done:
    llvm.return
  }
  llvm.func @d(%out: !llvm.ptr<1>, %n: i32) attributes {gpu.kernel, nvvm.kernel} {
    %table = llvm.mlir.addressof @table_c : !llvm.ptr<1>
    %zero = llvm.mlir.constant(0 : i32) : i32
    %positive = llvm.icmp "sgt" %n, %zero : i32
    llvm.cond_br %positive, ^store, ^done
  ^store:
    %at = llvm.getelementptr %table[%n] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    %x = llvm.load %at : !llvm.ptr<1> -> i32
    llvm.store %x, %out : i32, !llvm.ptr<1>
    llvm.br ^done
  ^done:
    llvm.return
  }
}
