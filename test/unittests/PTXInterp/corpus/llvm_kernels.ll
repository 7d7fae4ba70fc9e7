; Kernels written directly in LLVM IR, as kvq's NVVM path produces them.
target datalayout = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@smem = internal addrspace(3) global [64 x float] undef, align 4

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)
declare { float, i1 } @llvm.nvvm.shfl.sync.down.f32p(i32, float, i32, i32)
declare void @llvm.nvvm.barrier0()
declare float @llvm.nvvm.ex2.approx.f32(float)
declare i16 @llvm.nvvm.ff.to.e4m3x2.rn(float, float)
declare <2 x half> @llvm.nvvm.e4m3x2.to.f16x2.rn(i16)

; y[i] = a * x[i] + y[i] for i < n.
define ptx_kernel void @saxpy(float %a, ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %cta = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %cta, %ntid
  %i = add i32 %base, %tid
  %inb = icmp slt i32 %i, %n
  br i1 %inb, label %body, label %exit
body:
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  %vx = load float, ptr addrspace(1) %px, align 4
  %vy = load float, ptr addrspace(1) %py, align 4
  %r = call float @llvm.fma.f32(float %a, float %vx, float %vy)
  store float %r, ptr addrspace(1) %py, align 4
  br label %exit
exit:
  ret void
}
declare float @llvm.fma.f32(float, float, float)

; Block of 64 threads: out[cta] = sum over the block of exp2(in[i]) using a
; butterfly within each warp and shared memory across the two warps. Also
; out2[i] = shfl.down(in[i], 3) with the validity predicate selecting -1.
define ptx_kernel void @exp2_sum(ptr addrspace(1) %in, ptr addrspace(1) %out, ptr addrspace(1) %out2) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %cta = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %g = mul i32 %cta, 64
  %i = add i32 %g, %tid
  %p = getelementptr float, ptr addrspace(1) %in, i32 %i
  %v = load float, ptr addrspace(1) %p, align 4
  %e = call float @llvm.nvvm.ex2.approx.f32(float %v)
  %s1 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %e, i32 16, i32 31)
  %a1 = fadd float %e, %s1
  %s2 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %a1, i32 8, i32 31)
  %a2 = fadd float %a1, %s2
  %s3 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %a2, i32 4, i32 31)
  %a3 = fadd float %a2, %s3
  %s4 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %a3, i32 2, i32 31)
  %a4 = fadd float %a3, %s4
  %s5 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %a4, i32 1, i32 31)
  %a5 = fadd float %a4, %s5
  %sp = getelementptr [64 x float], ptr addrspace(3) @smem, i32 0, i32 %tid
  store float %a5, ptr addrspace(3) %sp, align 4
  %dn = call { float, i1 } @llvm.nvvm.shfl.sync.down.f32p(i32 -1, float %v, i32 3, i32 31)
  %dv = extractvalue { float, i1 } %dn, 0
  %ok = extractvalue { float, i1 } %dn, 1
  %sel = select i1 %ok, float %dv, float -1.0
  %p2 = getelementptr float, ptr addrspace(1) %out2, i32 %i
  store float %sel, ptr addrspace(1) %p2, align 4
  call void @llvm.nvvm.barrier0()
  %is0 = icmp eq i32 %tid, 0
  br i1 %is0, label %write, label %done
write:
  %w0 = load float, ptr addrspace(3) @smem, align 4
  %p32 = getelementptr [64 x float], ptr addrspace(3) @smem, i32 0, i32 32
  %w1 = load float, ptr addrspace(3) %p32, align 4
  %t = fadd float %w0, %w1
  %po = getelementptr float, ptr addrspace(1) %out, i32 %cta
  store float %t, ptr addrspace(1) %po, align 4
  br label %done
done:
  ret void
}

; Packs pairs of floats to e4m3x2 and unpacks them to f16x2, and does half
; arithmetic: q[i] = e4m3x2(in[2i], in[2i+1]); h[i] = f16x2(q[i]);
; hs[i] = h.lo * h.hi + h.lo (f16).
define ptx_kernel void @fp8_roundtrip(ptr addrspace(1) %in, ptr addrspace(1) %q, ptr addrspace(1) %h, ptr addrspace(1) %hs) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i2 = shl i32 %tid, 1
  %pa = getelementptr float, ptr addrspace(1) %in, i32 %i2
  %a = load float, ptr addrspace(1) %pa, align 8
  %pb = getelementptr float, ptr addrspace(1) %pa, i32 1
  %b = load float, ptr addrspace(1) %pb, align 4
  %c = call i16 @llvm.nvvm.ff.to.e4m3x2.rn(float %b, float %a)
  %pq = getelementptr i16, ptr addrspace(1) %q, i32 %tid
  store i16 %c, ptr addrspace(1) %pq, align 2
  %hv = call <2 x half> @llvm.nvvm.e4m3x2.to.f16x2.rn(i16 %c)
  %ph = getelementptr <2 x half>, ptr addrspace(1) %h, i32 %tid
  store <2 x half> %hv, ptr addrspace(1) %ph, align 4
  %lo = extractelement <2 x half> %hv, i32 0
  %hi = extractelement <2 x half> %hv, i32 1
  %m = fmul half %lo, %hi
  %s = fadd half %m, %lo
  %phs = getelementptr half, ptr addrspace(1) %hs, i32 %tid
  store half %s, ptr addrspace(1) %phs, align 2
  ret void
}

; A non-inlined device function with two parameters: out[i] = mix(i, in[i]).
define internal i32 @mix(i32 %a, i32 %b) noinline {
  %x = mul i32 %a, 2654435761
  %y = xor i32 %x, %b
  %r = call i32 @llvm.fshl.i32(i32 %y, i32 %y, i32 13)
  ret i32 %r
}
declare i32 @llvm.fshl.i32(i32, i32, i32)

define ptx_kernel void @call_mix(ptr addrspace(1) %in, ptr addrspace(1) %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %p = getelementptr i32, ptr addrspace(1) %in, i32 %tid
  %v = load i32, ptr addrspace(1) %p, align 4
  %r = call i32 @mix(i32 %tid, i32 %v)
  %q = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %r, ptr addrspace(1) %q, align 4
  ret void
}
