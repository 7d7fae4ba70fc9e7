//===- FloatFormats.h - Parameter dtypes of the reference -------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// Hand-written, bit-exact conversions between fp32 and the narrow formats a
// scheme may store its scales and zero-points in. They do not use the host's
// conversion instructions, so the oracle cannot inherit a backend's bug.
//
// Rounding is round-to-nearest, ties to even, with subnormals handled exactly:
//  - f16 (IEEE binary16) and bf16 overflow to +-inf exactly as IEEE RNE says
//    (a value at or above max + half an ulp becomes inf).
//  - f8E4M3 is the OCP / NVIDIA E4M3FN format (bias 7, max 448, no inf, NaN
//    only S.1111.111). Finite overflow and +-inf saturate to +-448; it never
//    produces NaN from a number.
//  - NaN inputs stay NaN (f16/bf16 keep the sign and the top payload bits,
//    forcing a quiet bit if the payload would vanish; f8E4M3 gives S.1111.111).
//    NaN never arises from finite cache data.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_FLOATFORMATS_H
#define KVQ_REFERENCE_FLOATFORMATS_H

#include <cstdint>

namespace kvq::ref {

/// The dtype a scheme stores its per-group parameters in.
enum class ParamType { F32, F16, BF16, F8E4M3 };

/// Returns the name used in diagnostics and docs ("f32", "f16", ...).
const char *toString(ParamType type);

/// Returns the number of bits one parameter of \p type occupies.
int bitWidth(ParamType type);

uint16_t toF16Bits(float x);
float fromF16Bits(uint16_t bits);

uint16_t toBF16Bits(float x);
float fromBF16Bits(uint16_t bits);

uint8_t toF8E4M3Bits(float x);
float fromF8E4M3Bits(uint8_t bits);

/// The largest finite value of \p type.
float maxParam(ParamType type);

/// True when \p x lies beyond \p type's finite range, so that store()
/// saturates it (numerics.md: such groups are counted).
bool exceedsParam(float x, ParamType type);

/// Rounds \p x to \p type and converts it back to fp32 (exact: every value of
/// every ParamType is an fp32 value), saturating at +-maxParam(type) instead
/// of overflowing to infinity. This is numerics.md's `store()`.
float storeParam(float x, ParamType type);

/// Returns the stored bit pattern of \p x in \p type, zero-extended (the fp32
/// bits for F32). \p x is rounded first, so storeParam'd values encode exactly.
uint32_t toParamBits(float x, ParamType type);

/// Inverse of toParamBits.
float fromParamBits(uint32_t bits, ParamType type);

/// The fp32 bit pattern of \p x, and back.
uint32_t toF32Bits(float x);
float fromF32Bits(uint32_t bits);

} // namespace kvq::ref

#endif // KVQ_REFERENCE_FLOATFORMATS_H
