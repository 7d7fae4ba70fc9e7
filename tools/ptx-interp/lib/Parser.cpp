//===- Parser.cpp - PTX text to decoded module ----------------------------===//
//
// A recursive-descent parser over the token stream. Declarations build the
// module's symbol tables; each instruction is decoded right away into an
// Instruction record (see Decode.cpp). Branch targets are patched once the
// whole function body has been seen.
//
//===----------------------------------------------------------------------===//

#include "Decode.h"
#include "Lexer.h"

#include <cstring>

using namespace kvq::ptx;

namespace {

/// Rounds V up to a multiple of A (a power of two).
uint64_t alignTo(uint64_t V, uint64_t A) { return (V + A - 1) / A * A; }

class Parser {
public:
  explicit Parser(const std::string &Source)
      : Source(Source), Toks(tokenize(Source)) {}

  Expected<Module> run();

private:
  const std::string &Source;
  std::vector<Token> Toks;
  size_t Pos = 0;
  Module M;
  std::string Err;

  const Token &peek(size_t Ahead = 0) const {
    return Toks[std::min(Pos + Ahead, Toks.size() - 1)];
  }
  const Token &next() {
    const Token &T = peek();
    if (Pos < Toks.size() - 1)
      ++Pos;
    return T;
  }
  bool fail(const std::string &Msg) {
    if (Err.empty())
      Err = "PTX parse error at line " + std::to_string(peek().Line) + ": " +
            Msg + " (near '" + peek().Text + "')";
    return false;
  }
  bool expect(char C) {
    if (!peek().is(C))
      return fail(std::string("expected '") + C + "'");
    next();
    return true;
  }
  bool parseUnsigned(uint64_t &V);
  bool skipStatement();
  bool skipBalanced();
  bool parseVariable(Space Sp, Function *Scope, DecodeContext *Ctx);
  bool parseParamList(Function &F, bool Record);
  bool parseFunction(bool IsEntry);
  bool parseBody(Function &F, DecodeContext &Ctx);
  bool parseRegDecl(Function &F, DecodeContext &Ctx);
  bool parseInstruction(Function &F, DecodeContext &Ctx);
};

bool Parser::parseUnsigned(uint64_t &V) {
  const Token &T = next();
  if (T.K != Token::Number)
    return fail("expected a number");
  V = std::strtoull(T.Text.c_str(), nullptr, 0);
  return true;
}

bool Parser::skipStatement() {
  while (peek().K != Token::End && !peek().is(';'))
    next();
  return expect(';');
}

bool Parser::skipBalanced() {
  if (!expect('{'))
    return false;
  for (int Depth = 1; Depth > 0; next()) {
    if (peek().K == Token::End)
      return fail("unbalanced braces");
    Depth += peek().is('{') - peek().is('}');
  }
  return true;
}

/// Parses `[.align N] [.vN] .type name[dims]* [= init];` after the state
/// space. Module-scope variables (Scope == nullptr) go to the module;
/// function-scope .local/.shared ones to the function.
bool Parser::parseVariable(Space Sp, Function *Scope, DecodeContext *Ctx) {
  unsigned Align = 0, Vec = 1;
  Type Ty = Type::None;
  while (peek().K == Token::Ident && peek().Text[0] == '.') {
    std::string W = next().Text;
    if (W == ".align") {
      uint64_t A;
      if (!parseUnsigned(A))
        return false;
      Align = A;
    } else if (W == ".v2" || W == ".v4") {
      Vec = W[2] - '0';
    } else if (W == ".ptr" || W == ".global") {
      // Only seen inside .param declarations; ignored.
    } else if ((Ty = parseTypeName(W.substr(1))) == Type::None) {
      return fail("unknown type in declaration: " + W);
    }
  }
  if (Ty == Type::None)
    return fail("declaration without a type");
  std::string Name = next().Text;
  uint64_t ElemBytes = (typeBits(Ty) + 7) / 8 * Vec;
  uint64_t Count = 1;
  bool Unsized = false;
  while (peek().is('[')) {
    next();
    if (peek().is(']')) {
      Unsized = true;
    } else {
      uint64_t D;
      if (!parseUnsigned(D))
        return false;
      Count *= D;
    }
    if (!expect(']'))
      return false;
  }
  Variable V;
  V.Name = Name;
  V.Sp = Sp;
  V.Align = Align ? Align : ElemBytes;
  V.Size = Unsized ? 0 : Count * ElemBytes;
  if (peek().is('=')) {
    next();
    std::vector<uint64_t> Vals;
    bool Braced = peek().is('{');
    if (Braced)
      next();
    while (!peek().is(';') && !peek().is('}')) {
      bool Neg = peek().is('-');
      if (Neg)
        next();
      const Token &T = next();
      if (T.K != Token::Number)
        return fail("only numeric initializers are supported");
      Immediate Imm;
      if (!parseImmediate(T.Text, Imm))
        return fail("bad initializer '" + T.Text + "'");
      Vals.push_back(immediateBits(Imm, Ty, Neg));
      if (peek().is(','))
        next();
    }
    if (Braced && !expect('}'))
      return false;
    V.Init.assign(V.Size, 0);
    for (size_t I = 0; I < Vals.size() && (I + 1) * ElemBytes / Vec <= V.Size;
         ++I)
      std::memcpy(&V.Init[I * (ElemBytes / Vec)], &Vals[I], ElemBytes / Vec);
  }
  if (!expect(';'))
    return false;
  if (Sp == Space::Local) {
    if (!Scope)
      return fail(".local variables at module scope are not supported");
    Scope->LocalAlign = std::max<unsigned>(Scope->LocalAlign, V.Align);
    V.Offset = alignTo(Scope->LocalBytes, V.Align);
    Scope->LocalBytes = V.Offset + V.Size;
    Ctx->addSymbol(V);
    return true;
  }
  if (Sp == Space::Param) {
    // A call sequence's argument or return slot, in per-thread storage.
    if (!Scope)
      return fail(".param variables at module scope are not supported");
    V.Sp = Space::ThreadParam;
    V.Offset = alignTo(Scope->ThreadParamBytes, V.Align);
    Scope->ThreadParamBytes = V.Offset + V.Size;
    Ctx->addSymbol(V);
    return true;
  }
  if (Sp == Space::Shared) {
    if (Unsized) {
      V.Offset = ~0ull; // Resolved once all static shared data is placed.
    } else {
      V.Offset = alignTo(M.StaticShared, V.Align);
      M.StaticShared = V.Offset + V.Size;
    }
  } else if (Sp == Space::Const) {
    V.Offset = alignTo(M.ConstData.size(), V.Align);
    M.ConstData.resize(V.Offset + V.Size, 0);
    std::copy(V.Init.begin(), V.Init.end(), M.ConstData.begin() + V.Offset);
  } else {
    V.Offset = alignTo(M.GlobalBytes, V.Align);
    M.GlobalBytes = V.Offset + V.Size;
  }
  if (Ctx)
    Ctx->addSymbol(V);
  M.Variables.push_back(std::move(V));
  return true;
}

/// Parses `( .param .type [.ptr .space .align N] name, ... )`.
bool Parser::parseParamList(Function &F, bool Record) {
  if (!expect('('))
    return false;
  while (!peek().is(')')) {
    if (!peek().isIdent(".param") && !peek().isIdent(".reg"))
      return fail("expected .param");
    next();
    unsigned Align = 0;
    Type Ty = Type::None;
    while (peek().K == Token::Ident && peek().Text[0] == '.') {
      std::string W = next().Text;
      if (W == ".align") {
        uint64_t A;
        if (!parseUnsigned(A))
          return false;
        Align = A;
      } else if (W == ".ptr" || W == ".global" || W == ".shared" ||
                 W == ".const" || W == ".local") {
      } else if ((Ty = parseTypeName(W.substr(1))) == Type::None) {
        return fail("unknown parameter type " + W);
      }
    }
    Param P;
    P.Name = next().Text;
    unsigned Elem = std::max(1u, typeBits(Ty) / 8), Count = 1;
    if (peek().is('[')) {
      next();
      uint64_t D;
      if (!parseUnsigned(D) || !expect(']'))
        return false;
      Count = D;
    }
    P.Size = Elem * Count;
    // `.ptr .align N` describes the pointee; the slot aligns to its type.
    P.Align = (Align && Count > 1) ? Align : Elem;
    P.Offset = alignTo(F.ParamBytes, P.Align);
    F.ParamBytes = P.Offset + P.Size;
    if (Record)
      F.Params.push_back(P);
    if (peek().is(','))
      next();
  }
  return expect(')');
}

bool Parser::parseFunction(bool IsEntry) {
  Function F;
  F.IsEntry = IsEntry;
  Function Ret;
  if (!IsEntry && peek().is('(') && !parseParamList(Ret, true))
    return false;
  F.Name = next().Text;
  if (peek().is('(') && !parseParamList(F, true))
    return false;
  if (!IsEntry) {
    // A .func keeps parameters, then return values, in its per-thread
    // .param frame.
    F.ThreadParamBytes = F.ParamBytes;
    for (Param P : Ret.Params) {
      P.Offset = alignTo(F.ThreadParamBytes, P.Align);
      F.ThreadParamBytes = P.Offset + P.Size;
      F.Returns.push_back(P);
    }
  }
  // Performance directives (.maxntid 256, 1, 1 / .reqntid / .noreturn ...).
  while (peek().K == Token::Ident || peek().K == Token::Number ||
         peek().is(','))
    next();
  if (peek().is(';')) { // A prototype.
    next();
    return true;
  }
  DecodeContext Ctx(M, F, static_cast<uint32_t>(M.Functions.size()));
  if (!parseBody(F, Ctx))
    return false;
  if (!Ctx.resolveLabels(Err))
    return false;
  M.Functions.push_back(std::move(F));
  return true;
}

bool Parser::parseRegDecl(Function &F, DecodeContext &Ctx) {
  Type Ty = Type::None;
  while (peek().K == Token::Ident && peek().Text[0] == '.') {
    std::string W = next().Text;
    if (W == ".v2" || W == ".v4")
      return fail("vector registers are not supported");
    Ty = parseTypeName(W.substr(1));
    if (Ty == Type::None)
      return fail("unknown register type " + W);
  }
  for (;;) {
    std::string Name = next().Text;
    if (peek().is('<')) {
      next();
      uint64_t N;
      if (!parseUnsigned(N) || !expect('>'))
        return false;
      for (uint64_t I = 0; I < N; ++I)
        Ctx.addRegister(Name + std::to_string(I), Ty);
    } else {
      Ctx.addRegister(Name, Ty);
    }
    if (!peek().is(','))
      break;
    next();
  }
  return expect(';');
}

bool Parser::parseBody(Function &F, DecodeContext &Ctx) {
  if (!expect('{'))
    return false;
  Ctx.pushScope();
  int Depth = 1;
  while (Depth > 0) {
    const Token &T = peek();
    if (T.K == Token::End)
      return fail("unterminated function body");
    if (T.is('{')) {
      next();
      ++Depth;
      Ctx.pushScope();
    } else if (T.is('}')) {
      next();
      --Depth;
      Ctx.popScope();
    } else if (T.isIdent(".reg")) {
      next();
      if (!parseRegDecl(F, Ctx))
        return false;
    } else if (T.isIdent(".local") || T.isIdent(".shared") ||
               T.isIdent(".param")) {
      Space Sp = T.Text == ".local"    ? Space::Local
                 : T.Text == ".shared" ? Space::Shared
                                       : Space::Param;
      next();
      if (!parseVariable(Sp, &F, &Ctx))
        return false;
    } else if (T.isIdent(".pragma") || T.isIdent(".loc") ||
               T.isIdent(".file")) {
      // .loc has no ';'; it ends at the line.
      uint32_t L = T.Line;
      next();
      while (peek().Line == L && !peek().is(';') && peek().K != Token::End)
        next();
      if (peek().is(';'))
        next();
    } else if (T.K == Token::Ident && peek(1).is(':')) {
      Ctx.addLabel(T.Text);
      next();
      next();
    } else if (!parseInstruction(F, Ctx)) {
      return false;
    }
  }
  return true;
}

bool Parser::parseInstruction(Function &F, DecodeContext &Ctx) {
  uint32_t Begin = peek().Begin, Line = peek().Line;
  RawInstruction Raw;
  Raw.Line = Line;
  if (peek().is('@')) {
    next();
    if (peek().is('!')) {
      next();
      Raw.GuardNegated = true;
    }
    Raw.Guard = next().Text;
  }
  if (peek().K != Token::Ident)
    return fail("expected an instruction");
  Raw.Opcode = next().Text;
  // Operands: a flat token list split at top-level commas; braces and
  // brackets and parentheses group.
  std::vector<Token> Cur;
  int Depth = 0;
  while (!(Depth == 0 && peek().is(';'))) {
    const Token &T = next();
    if (T.K == Token::End)
      return fail("missing ';'");
    if (T.is('{') || T.is('[') || T.is('('))
      ++Depth;
    if (T.is('}') || T.is(']') || T.is(')'))
      --Depth;
    if (Depth == 0 && T.is(',')) {
      Raw.Operands.push_back(std::move(Cur));
      Cur.clear();
      continue;
    }
    Cur.push_back(T);
  }
  if (!Cur.empty())
    Raw.Operands.push_back(std::move(Cur));
  uint32_t End = peek().End_;
  next();
  Raw.Text = Source.substr(Begin, End - Begin);
  return Ctx.decode(Raw, Err);
}

Expected<Module> Parser::run() {
  while (peek().K != Token::End && Err.empty()) {
    const Token &T = peek();
    if (T.isIdent(".version") || T.isIdent(".target")) {
      bool IsVersion = T.Text == ".version";
      uint32_t L = next().Line;
      std::string V;
      while (peek().Line == L && peek().K != Token::End)
        V += next().Text;
      (IsVersion ? M.Version : M.Target) = V;
    } else if (T.isIdent(".address_size")) {
      next();
      uint64_t Bits;
      if (!parseUnsigned(Bits))
        break;
      if (Bits != 64)
        fail("only .address_size 64 is supported");
    } else if (T.isIdent(".file") || T.isIdent(".loc")) {
      uint32_t L = next().Line;
      while (peek().Line == L && peek().K != Token::End)
        next();
    } else if (T.isIdent(".section")) {
      next();
      next();
      skipBalanced();
    } else if (T.isIdent(".pragma")) {
      skipStatement();
    } else if (T.isIdent(".visible") || T.isIdent(".extern") ||
               T.isIdent(".weak") || T.isIdent(".common")) {
      next();
    } else if (T.isIdent(".entry") || T.isIdent(".func")) {
      bool IsEntry = T.Text == ".entry";
      next();
      parseFunction(IsEntry);
    } else if (T.isIdent(".global") || T.isIdent(".shared") ||
               T.isIdent(".const")) {
      Space Sp = T.Text == ".global"   ? Space::Global
                 : T.Text == ".shared" ? Space::Shared
                                       : Space::Const;
      next();
      parseVariable(Sp, nullptr, nullptr);
    } else {
      fail("unexpected token at module scope");
    }
  }
  if (!Err.empty())
    return Status::error(ErrorCode::Backend, Err);
  finalizeModule(M);
  return std::move(M);
}

} // namespace

Expected<Module> kvq::ptx::parseModule(const std::string &Text) {
  Parser P(Text);
  return P.run();
}
