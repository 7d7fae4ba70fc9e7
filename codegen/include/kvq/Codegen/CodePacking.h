//===- CodePacking.h - codes into 32-bit words ------------------*- C++ -*-===//
//
// How a group's codes, lowest first, fill its words (docs/KernelABI.md: code
// k at bit k * bits of the group's stream): the scalar packer shared by the
// flush kernels and kvq-expand-pack's portable form of `kvq.pack`, and the
// unpacker of codes in pairs for 16-bit pair dots shared by the emitted
// attend kernels and the attend programs' integer dots.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_CODEPACKING_H
#define KVQ_CODEGEN_CODEPACKING_H

#include "kvq/Codegen/KernelBuilder.h"

#include <optional>

namespace kvq {

/// How the code at bit `bit` of a group's stream moves into word `w`:
/// shifted left by `left` (its high bits past bit 31 belong to the next
/// word) or right by `right`.
struct WordShift {
  int32_t left, right;
};
/// The shift of a `bits`-bit code at bit `bit` into word `w`; nullopt where
/// no bit of it is in the word.
std::optional<WordShift> shiftIntoWord(int64_t bit, unsigned bits, unsigned w);

/// The words of a group of `count` codes, code k `code(k)` (a scalar or a
/// vector of groups): each code ORed into its word(s) as it is computed,
/// so that only the words stay live, not the codes.
llvm::SmallVector<mlir::Value>
packWords(KernelBuilder &kb, unsigned count, unsigned bits,
          llvm::function_ref<mlir::Value(unsigned k)> code);

/// Lane l of the result (i32 lanes) holds two codes of `bits` (at most 8)
/// bits from the byte vector `bytes`: in its low 16 bits the code at bit
/// halfBits[2l], in its high 16 bits the one at bit halfBits[2l + 1]. A half
/// gathers the two bytes its code starts in (one byte shuffle for all); one
/// shift below 8 per half and one mask leave the codes. Where the halves of
/// every lane shift alike the shifts are i32 lanes' (no bit of a high half
/// reaches a low one's field), else i16 lanes'.
mlir::Value unpackHalves(KernelBuilder &kb, mlir::Value bytes, unsigned bits,
                         llvm::ArrayRef<unsigned> halfBits);

} // namespace kvq

#endif // KVQ_CODEGEN_CODEPACKING_H
