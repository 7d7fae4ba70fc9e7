//===- Decode.h - Decoding PTX instructions --------------------*- C++ -*-===//
//
// Internal interface between the parser, which splits statements into an
// opcode and operand token lists, and the decoder, which resolves names and
// modifiers into the compact Instruction form.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_LIB_DECODE_H
#define KVQ_PTXINTERP_LIB_DECODE_H

#include "Lexer.h"
#include "kvq/PTXInterp/Module.h"

#include <map>

namespace kvq::ptx {

/// One instruction statement as written.
struct RawInstruction {
  std::string Guard;
  bool GuardNegated = false;
  std::string Opcode;
  std::vector<std::vector<Token>> Operands;
  std::string Text;
  uint32_t Line = 0;
};

/// A numeric literal: an integer or a float of known encoding.
struct Immediate {
  enum Kind { Int, F32Bits, F64Bits, Decimal } K = Int;
  uint64_t Bits = 0;
  double Value = 0;
};

Type parseTypeName(const std::string &Name);
bool parseImmediate(const std::string &Text, Immediate &Imm);
/// The bits of Imm as an operand of type Ty; Negative applies a leading '-'.
uint64_t immediateBits(const Immediate &Imm, Type Ty, bool Negative);
/// Places dynamic shared memory after all static shared data.
void finalizeModule(Module &M);

/// Per-function decoding state: register scopes, symbols, labels.
class DecodeContext {
public:
  DecodeContext(Module &M, Function &F, uint32_t FuncIndex);

  void pushScope() { Scopes.emplace_back(); }
  void popScope() { Scopes.pop_back(); }
  void addRegister(const std::string &Name, Type Ty);
  void addSymbol(const Variable &V) { LocalSymbols[V.Name] = V; }
  void addLabel(const std::string &Name) {
    Labels[Name] = static_cast<uint32_t>(F.Code.size());
  }
  /// Decodes Raw and appends it to the function. Returns false (with Err)
  /// only for malformed text; unimplemented forms become Unsupported.
  bool decode(const RawInstruction &Raw, std::string &Err);
  bool resolveLabels(std::string &Err);

private:
  Module &M;
  Function &F;
  uint32_t FuncIndex;
  std::vector<std::map<std::string, int32_t>> Scopes;
  std::map<std::string, Variable> LocalSymbols;
  std::map<std::string, uint32_t> Labels;
  struct PendingLabel {
    uint32_t Inst;
    uint8_t Op;
    std::string Name;
    uint32_t Line;
  };
  std::vector<PendingLabel> Pending;

  int32_t lookupRegister(const std::string &Name) const;
  /// The hidden register holding CC.CF, created on first use.
  int32_t carryRegister() {
    if (CarryReg < 0) {
      CarryReg = static_cast<int32_t>(F.Regs.size());
      F.Regs.push_back({"%cc.cf", Type::Pred});
    }
    return CarryReg;
  }
  int32_t CarryReg = -1;
  friend class InstructionDecoder;
};

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_LIB_DECODE_H
