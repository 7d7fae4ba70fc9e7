//===- Reference.h - The kvq numerics oracle --------------------*- C++ -*-===//
//
// Part of kvq, the reference implementation of numerics.md.
//
//===----------------------------------------------------------------------===//
//
// Umbrella header. The reference is a deliberately simple, independent
// implementation of docs/Numerics.md (kvq's reading of the design contract):
// every kvq test compares codes and stored parameters to it bit for bit and
// attention outputs within a tolerance. It shares no code with the compiler,
// the runtime or the kernels, and depends on nothing but the C++ library.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_REFERENCE_REFERENCE_H
#define KVQ_REFERENCE_REFERENCE_H

#include "kvq/Reference/FloatFormats.h"
#include "kvq/Reference/Packing.h"
#include "kvq/Reference/Quantizer.h"
#include "kvq/Reference/Rope.h"
#include "kvq/Reference/Rotation.h"
#include "kvq/Reference/Slice.h"

#endif // KVQ_REFERENCE_REFERENCE_H
