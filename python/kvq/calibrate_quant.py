"""The span = channels asym quantizer of docs/Numerics.md in numpy, as
kvq-calibrate needs it: one token's channels in groups of varying size after
a channel permutation, each group clipped by its own factor.

This is the calibration's model of the cache, not a kernel: its search tries
thousands of (permutation, clip) candidates and cannot compile each. It
follows the contract step for step (f32 arithmetic, true division, round to
nearest even, parameters rounded to their dtype with saturation before codes
are computed), and test/python/test_calibrate.py checks its codes and
parameters against pages written by the compiled CPU kernels.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
_F16_MAX = 65504.0
_BF16_MAX = 3.3895313892515355e38
_F8E4M3_MAX = 448.0


def store(x, params: str) -> np.ndarray:
    """`x` rounded to the parameter dtype (f32, f16, bf16, f8E4M3FN), to
    nearest even and saturating at the largest finite value, as f32."""
    x = np.asarray(x, F32)
    if params == "f32":
        return x.copy()
    if params == "f16":
        return np.clip(x, -_F16_MAX, _F16_MAX).astype(np.float16).astype(F32)
    if params == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        out = rounded.astype(np.uint32).view(F32)
        return np.clip(np.nan_to_num(out, posinf=_BF16_MAX, neginf=-_BF16_MAX),
                       -_BF16_MAX, _BF16_MAX).astype(F32)
    if params == "f8E4M3FN":
        a = np.abs(x).astype(np.float64)
        # 3 mantissa bits; exponents below the smallest normal (2^-6) share
        # the subnormal step 2^-9.
        exponent = np.floor(np.log2(np.maximum(a, 2.0**-9)))
        step = 2.0 ** (np.maximum(exponent, -6) - 3)
        rounded = np.minimum(np.rint(a / step) * step, _F8E4M3_MAX)
        return (np.sign(x) * rounded).astype(F32)
    raise ValueError(f"unknown parameter dtype {params!r}")


def quantize(x, levels: int, params: str, clip=1.0):
    """Codes, scale and zero-point of the groups along the last axis of `x`
    (numerics.md, clipped asym): lo = clip * min, hi = clip * max,
    s = store((hi - lo) / (L - 1)), z = store(lo),
    c = clamp(rne((x - z) / s), 0, L - 1); a constant group stores c = 0.
    `clip` broadcasts against the groups (x.shape[:-1])."""
    x = np.asarray(x, F32)
    clip = np.asarray(clip, F32)
    lo = (clip * x.min(axis=-1)).astype(F32)
    hi = (clip * x.max(axis=-1)).astype(F32)
    scale = store((hi - lo) / F32(levels - 1), params)
    zero = store(lo, params)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (x - zero[..., None]) / scale[..., None]
    codes = np.clip(np.rint(ratio), 0, levels - 1)
    codes = np.where(scale[..., None] == 0, 0, codes).astype(np.int32)
    return codes, scale, zero


def dequantize(codes, scale, zero) -> np.ndarray:
    return (codes.astype(F32) * scale[..., None] + zero[..., None]).astype(F32)


def fake_quantize(x, levels: int, params: str, clip=1.0) -> np.ndarray:
    """The reconstruction of the groups along the last axis of `x`."""
    return dequantize(*quantize(x, levels, params, clip))


def reconstruct(x, perm, sizes, levels: int, params: str, clips) -> np.ndarray:
    """The reconstruction of tokens x [..., D] of one kv-head whose channels
    are permuted by `perm` (perm[i] = the channel at position i) and grouped
    by `sizes`, group g clipped by clips[g]; returned in the original channel
    order."""
    x = np.asarray(x, F32)
    permuted = x[..., perm]
    out = np.empty_like(permuted)
    start = 0
    for size, clip in zip(sizes, clips):
        part = permuted[..., start:start + size]
        out[..., start:start + size] = fake_quantize(part, levels, params, clip)
        start += size
    restored = np.empty_like(out)
    restored[..., perm] = out
    return restored
