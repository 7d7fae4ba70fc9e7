//===- Lexer.cpp - PTX tokenizer ------------------------------------------===//

#include "Lexer.h"

#include <cctype>
#include <cstring>

using namespace kvq::ptx;

static bool isIdentChar(char C) {
  return std::isalnum(static_cast<unsigned char>(C)) || C == '_' || C == '.' ||
         C == '%' || C == '$' || C == ':';
}

static bool isIdentStart(char C) {
  return std::isalpha(static_cast<unsigned char>(C)) || C == '_' || C == '.' ||
         C == '%' || C == '$';
}

std::vector<Token> kvq::ptx::tokenize(const std::string &S) {
  std::vector<Token> Tokens;
  uint32_t Line = 1;
  size_t I = 0, N = S.size();
  auto Push = [&](Token::Kind K, size_t Begin, size_t End) {
    Token T;
    T.K = K;
    T.Text = S.substr(Begin, End - Begin);
    T.Line = Line;
    T.Begin = Begin;
    T.End_ = End;
    Tokens.push_back(std::move(T));
  };
  while (I < N) {
    char C = S[I];
    if (C == '\n') {
      ++Line;
      ++I;
    } else if (std::isspace(static_cast<unsigned char>(C))) {
      ++I;
    } else if (C == '/' && I + 1 < N && S[I + 1] == '/') {
      while (I < N && S[I] != '\n')
        ++I;
    } else if (C == '/' && I + 1 < N && S[I + 1] == '*') {
      I += 2;
      while (I + 1 < N && !(S[I] == '*' && S[I + 1] == '/'))
        Line += S[I++] == '\n';
      I += 2;
    } else if (C == '"') {
      size_t B = I++;
      while (I < N && S[I] != '"')
        ++I;
      Push(Token::String, B, ++I);
    } else if (std::isdigit(static_cast<unsigned char>(C))) {
      size_t B = I;
      bool Hex =
          C == '0' && I + 1 < N && std::strchr("xXfFdD", S[I + 1]) != nullptr;
      while (I < N &&
             (std::isalnum(static_cast<unsigned char>(S[I])) || S[I] == '.')) {
        char P = S[I++];
        if (!Hex && (P == 'e' || P == 'E') && I < N &&
            (S[I] == '+' || S[I] == '-'))
          ++I;
      }
      Push(Token::Number, B, I);
    } else if (isIdentStart(C)) {
      size_t B = I;
      // "::" appears inside modifiers (.shared::cta); a single ':' ends a
      // label.
      while (I < N && isIdentChar(S[I])) {
        if (S[I] == ':' && !(I + 1 < N && S[I + 1] == ':') &&
            !(I > B && S[I - 1] == ':'))
          break;
        ++I;
      }
      Push(Token::Ident, B, I);
    } else {
      Push(Token::Punct, I, I + 1);
      ++I;
    }
  }
  Token End;
  End.Line = Line;
  End.Begin = End.End_ = N;
  Tokens.push_back(End);
  return Tokens;
}
