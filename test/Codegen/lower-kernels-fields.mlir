// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=CPU
// RUN: kvq-opt %s --kvq-assign-layout --kvq-plan-kernels --kvq-select-forms --kvq-lower-kernels | FileCheck %s --check-prefix=GPU

// InnerQ's 3-bit codes (AttendMatrix.cpp, "3-bit codes"): on the CPU, the
// vector forms unpack them 16 lanes at a time; on sm_80+ both quantized
// loops take matrix forms whose A words come from a thread's 24-bit field.
kvq.cache @innerq model <layers = 1, heads = 4, kv_heads = 1, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = sym, span = tokens, group = 32>
  }
}

// CPU-LABEL: func.func @innerq_attend_0(
// CPU-NOT: nvvm.
// CPU: kvq.unpack %{{.*}} {bits = 3 : i32, offset = 0 : i32, stride = 3 : i32} : vector<3xi32> -> vector<16xi32>
// CPU-NOT: nvvm.
// CPU: return

// Keys: one prmt gathers the field; each f16x2 word is one lop3 (codes 0
// and 4 under mask 0x70070 after a left shift by 4, codes 1 and 5 under
// 0x380380) and one f16x2 fma back to the exact codes; a group's products
// start from zero and run twice per k-step (the query's split halves).
// GPU-LABEL: gpu.func @innerq_attend_0(
// GPU: nvvm.prmt <default>
// GPU: arith.shli %{{.*}}, %c4_i32
// GPU: "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,n" %{{.*}}, %c458864_i32
// GPU: llvm.intr.fma({{.*}}) : (vector<2xf16>, vector<2xf16>, vector<2xf16>) -> vector<2xf16>
// GPU: "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,n" %{{.*}}, %c3670912_i32
// GPU: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[%[[ZERO:.*]], %[[ZERO]], %[[ZERO]], %[[ZERO]]] {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// GPU-NEXT: llvm.extractvalue
// GPU: nvvm.mma.sync
// GPU: nvvm.bar.warp.sync
// Values after the softmax: the same fields, one product per k-step (f16
// weights).
// GPU: llvm.call_intrinsic "llvm.exp2"
// GPU: nvvm.prmt <default>
// GPU: llvm.intr.fma({{.*}}) : (vector<2xf16>, vector<2xf16>, vector<2xf16>) -> vector<2xf16>
// GPU: nvvm.mma.sync
// GPU-NOT: kvq.unpack
// GPU: gpu.return
