//===- Lexer.h - PTX tokenizer ---------------------------------*- C++ -*-===//
//
// Splits PTX text into tokens. Identifiers include '.', '%' and '$' so that
// opcodes with their modifiers (`ld.global.nc.v4.f32`) and special registers
// (`%tid.x`) are single tokens; the parser splits them further.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_LIB_LEXER_H
#define KVQ_PTXINTERP_LIB_LEXER_H

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::ptx {

struct Token {
  enum Kind : uint8_t { Ident, Number, String, Punct, End };
  Kind K = End;
  std::string Text;
  uint32_t Line = 0;
  /// Start and end offsets in the source, for instruction text.
  uint32_t Begin = 0, End_ = 0;

  bool is(char C) const {
    return K == Punct && Text.size() == 1 && Text[0] == C;
  }
  bool isIdent(const char *S) const { return K == Ident && Text == S; }
};

/// Tokenizes Source; comments are dropped. Never fails: unknown characters
/// become one-character Punct tokens for the parser to reject.
std::vector<Token> tokenize(const std::string &Source);

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_LIB_LEXER_H
