//===- Runtime.h - libkvq_runtime C++ API -----------------------*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// Umbrella header of the C++ API:
//
//   auto A = kvq::runtime::Artifact::open("build/kivi.kvq");   // manifest.json
//   auto C = kvq::runtime::Cache::create(*A, {});              // CPU backend
//   auto Seq = (*C)->addSequence();
//   (*C)->append(Layer, {{*Seq, N, K, V}});                    //
//   prefill/decode
//   (*C)->attend(Layer, {*Seq}, Q, Out);                       // decode attn
//
// Artifact.h   the compiled artifact (manifest, PTX, host code)
// Backend.h    CPU and device (CUDA, PTX interpreter) backends
// Cache.h      sequences, pages, windows, append and attend
// The C API is kvq/kvq.h.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_RUNTIME_H
#define KVQ_RUNTIME_RUNTIME_H

#include "kvq/Runtime/Artifact.h"
#include "kvq/Runtime/Backend.h"
#include "kvq/Runtime/Cache.h"
#include "kvq/Runtime/DeviceDriver.h"

namespace kvq::runtime {

/// Converts fp32 values to the model dtype's raw bits, round to nearest even
/// (f16/bf16: 2 bytes each, f32: a copy). Out holds N * byteSize(Type) bytes.
void convertFromF32(DType Type, const float *In, size_t N, void *Out);
/// Converts raw model-dtype values to fp32 (exact).
void convertToF32(DType Type, const void *In, size_t N, float *Out);
/// Index of the first NaN or infinity among N raw values, or N if none.
size_t findNonFinite(DType Type, const void *In, size_t N);

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_RUNTIME_H
