//===- Alu.h - Per-lane evaluation of pure PTX instructions ----*- C++ -*-===//
//
// Everything that computes a result from register values alone: integer,
// bit, float and conversion instructions, comparisons and selects.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_LIB_ALU_H
#define KVQ_PTXINTERP_LIB_ALU_H

#include "kvq/PTXInterp/Module.h"

namespace kvq::ptx {

/// True when I is evaluated by evalLane.
bool isAluOp(const Instruction &I);

/// Computes I's result from its source operand values Src[1..NumOps-1]
/// (Src[0] holds the old destination value). Dst2 receives the second
/// destination of setp (q of p|q). Returns false with Err set for forms that
/// pass decoding but cannot be evaluated.
bool evalLane(const Instruction &I, const uint64_t *Src, uint64_t &Dst,
              uint64_t &Dst2, std::string &Err);

/// Sign- or zero-extends the low bits of V per type T to 64 bits.
inline uint64_t extendTo64(uint64_t V, Type T) {
  switch (T) {
  case Type::S8:
    return static_cast<uint64_t>(static_cast<int8_t>(V));
  case Type::S16:
    return static_cast<uint64_t>(static_cast<int16_t>(V));
  case Type::S32:
    return static_cast<uint64_t>(static_cast<int32_t>(V));
  case Type::Pred:
    return V & 1;
  case Type::B64:
  case Type::U64:
  case Type::S64:
  case Type::F64:
  case Type::None:
  case Type::B128:
    return V;
  default: {
    unsigned Bits = typeBits(T);
    return V & ((1ull << Bits) - 1);
  }
  }
}

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_LIB_ALU_H
