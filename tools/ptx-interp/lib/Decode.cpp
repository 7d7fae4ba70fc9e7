//===- Decode.cpp - Decoding PTX instructions -----------------------------===//
//
// Turns an opcode string with its dot-separated modifiers and the operand
// token lists into an Instruction. Modifiers that change results must be
// understood or the instruction decodes to Opcode::Unsupported; modifiers
// that only affect caching or memory ordering (which a sequential
// interpreter already satisfies) are accepted and ignored.
//
//===----------------------------------------------------------------------===//

#include "Decode.h"
#include "MatrixOps.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace kvq::ptx;

//===----------------------------------------------------------------------===//
// Types and literals
//===----------------------------------------------------------------------===//

namespace {
struct TypeEntry {
  const char *Name;
  Type Ty;
  unsigned Bits;
};
const TypeEntry TypeTable[] = {
    {"pred", Type::Pred, 1},      {"b8", Type::B8, 8},
    {"b16", Type::B16, 16},       {"b32", Type::B32, 32},
    {"b64", Type::B64, 64},       {"b128", Type::B128, 128},
    {"u8", Type::U8, 8},          {"u16", Type::U16, 16},
    {"u32", Type::U32, 32},       {"u64", Type::U64, 64},
    {"s8", Type::S8, 8},          {"s16", Type::S16, 16},
    {"s32", Type::S32, 32},       {"s64", Type::S64, 64},
    {"f16", Type::F16, 16},       {"f16x2", Type::F16x2, 32},
    {"bf16", Type::BF16, 16},     {"bf16x2", Type::BF16x2, 32},
    {"f32", Type::F32, 32},       {"f64", Type::F64, 64},
    {"e4m3x2", Type::E4M3x2, 16}, {"e5m2x2", Type::E5M2x2, 16},
};
} // namespace

Type kvq::ptx::parseTypeName(const std::string &Name) {
  for (const TypeEntry &E : TypeTable)
    if (Name == E.Name)
      return E.Ty;
  return Type::None;
}

unsigned kvq::ptx::typeBits(Type T) {
  // Indexed by Type; typeBits is on the interpreter's hot path.
  static const uint8_t Bits[] = {0,  1,  8,  16, 32, 64, 128, 8,  16, 32, 64, 8,
                                 16, 32, 64, 16, 32, 16, 32,  32, 64, 16, 16};
  static_assert(sizeof(Bits) == static_cast<size_t>(Type::E5M2x2) + 1,
                "type width table out of sync");
  return Bits[static_cast<size_t>(T)];
}

const char *kvq::ptx::typeName(Type T) {
  for (const TypeEntry &E : TypeTable)
    if (E.Ty == T)
      return E.Name;
  return "none";
}

bool kvq::ptx::isSigned(Type T) {
  return T == Type::S8 || T == Type::S16 || T == Type::S32 || T == Type::S64;
}

bool kvq::ptx::isFloat(Type T) {
  return T == Type::F16 || T == Type::F16x2 || T == Type::BF16 ||
         T == Type::BF16x2 || T == Type::F32 || T == Type::F64;
}

const char *kvq::ptx::className(InstClass C) {
  static const char *Names[] = {"integer", "float", "conversion", "memory",
                                "control", "sync",  "move",       "matrix"};
  return Names[static_cast<int>(C)];
}

bool kvq::ptx::parseImmediate(const std::string &T, Immediate &Imm) {
  if (T.size() > 2 && T[0] == '0' && (T[1] == 'f' || T[1] == 'F')) {
    Imm.K = Immediate::F32Bits;
    Imm.Bits = std::strtoull(T.c_str() + 2, nullptr, 16);
    return T.size() == 10;
  }
  if (T.size() > 2 && T[0] == '0' && (T[1] == 'd' || T[1] == 'D')) {
    Imm.K = Immediate::F64Bits;
    Imm.Bits = std::strtoull(T.c_str() + 2, nullptr, 16);
    return T.size() == 18;
  }
  bool IsHex = T.size() > 2 && T[0] == '0' && (T[1] == 'x' || T[1] == 'X');
  if (!IsHex && T.find_first_of(".eE") != std::string::npos) {
    Imm.K = Immediate::Decimal;
    char *End;
    Imm.Value = std::strtod(T.c_str(), &End);
    return *End == 0;
  }
  Imm.K = Immediate::Int;
  char *End;
  Imm.Bits = std::strtoull(T.c_str(), &End, 0);
  return *End == 0 || ((*End == 'U' || *End == 'u') && End[1] == 0);
}

static uint64_t floatBits(float F) {
  uint32_t B;
  std::memcpy(&B, &F, 4);
  return B;
}
static uint64_t doubleBits(double D) {
  uint64_t B;
  std::memcpy(&B, &D, 8);
  return B;
}

uint64_t kvq::ptx::immediateBits(const Immediate &Imm, Type Ty, bool Negative) {
  double V = 0;
  switch (Imm.K) {
  case Immediate::Int:
    return Negative ? static_cast<uint64_t>(-static_cast<int64_t>(Imm.Bits))
                    : Imm.Bits;
  case Immediate::F32Bits: {
    uint32_t B = static_cast<uint32_t>(Imm.Bits) ^ (Negative ? 0x80000000u : 0);
    if (Ty != Type::F64)
      return B;
    float F;
    std::memcpy(&F, &B, 4);
    return doubleBits(F);
  }
  case Immediate::F64Bits: {
    uint64_t B = Imm.Bits ^ (Negative ? 1ull << 63 : 0);
    if (Ty == Type::F64 || typeBits(Ty) == 64)
      return B;
    std::memcpy(&V, &B, 8);
    return floatBits(static_cast<float>(V));
  }
  case Immediate::Decimal:
    V = Negative ? -Imm.Value : Imm.Value;
    return Ty == Type::F64 ? doubleBits(V) : floatBits(static_cast<float>(V));
  }
  return 0;
}

static void resolveCalls(Module &M);

void kvq::ptx::finalizeModule(Module &M) {
  unsigned MaxAlign = 16;
  for (const Variable &V : M.Variables)
    if (V.Sp == Space::Shared)
      MaxAlign = std::max(MaxAlign, V.Align);
  M.DynamicSharedOffset = (M.StaticShared + MaxAlign - 1) / MaxAlign * MaxAlign;
  for (const Module::GlobalReloc &R : M.DynamicSharedRelocs)
    M.Functions[R.Func].Code[R.Inst].Ops[R.Op].Value += M.DynamicSharedOffset;
  resolveCalls(M);
}

/// Binds call sites to function bodies. Calls that cannot run (no body,
/// wrong arity) become Unsupported so they fail only when executed.
static void resolveCalls(Module &M) {
  for (Function &F : M.Functions) {
    for (size_t I = 0; I < F.Code.size(); ++I) {
      Instruction &Inst = F.Code[I];
      if (Inst.Op != Opcode::Call)
        continue;
      CallSite &Site = F.Calls[static_cast<size_t>(Inst.Ops[0].Value)];
      for (size_t K = 0; K < M.Functions.size(); ++K)
        if (M.Functions[K].Name == Site.CalleeName && !M.Functions[K].IsEntry)
          Site.Callee = static_cast<int32_t>(K);
      std::string Note;
      if (Site.Callee < 0) {
        Note = "call of '" + Site.CalleeName +
               "', which has no body in this module";
      } else {
        const Function &Callee = M.Functions[Site.Callee];
        if (Callee.Params.size() != Site.ArgOffsets.size() ||
            Callee.Returns.size() < Site.RetOffsets.size())
          Note = "call of '" + Site.CalleeName +
                 "' with the wrong number of arguments";
      }
      if (!Note.empty()) {
        Inst.Op = Opcode::Unsupported;
        F.Notes[I] = Note;
      }
    }
  }
}

const Function *Module::findFunction(const std::string &Name) const {
  for (const Function &F : Functions)
    if (F.Name == Name)
      return &F;
  return nullptr;
}

void Module::placeGlobals(uint64_t Base) {
  for (const GlobalReloc &R : GlobalRelocs)
    Functions[R.Func].Code[R.Inst].Ops[R.Op].Value += Base;
  GlobalRelocs.clear();
}

//===----------------------------------------------------------------------===//
// DecodeContext
//===----------------------------------------------------------------------===//

namespace {
const char *const SpecialNames[] = {
    "%tid.x",       "%tid.y",       "%tid.z",       "%ntid.x",
    "%ntid.y",      "%ntid.z",      "%ctaid.x",     "%ctaid.y",
    "%ctaid.z",     "%nctaid.x",    "%nctaid.y",    "%nctaid.z",
    "%laneid",      "%warpid",      "%nwarpid",     "%lanemask_eq",
    "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge",
    "%smid",        "%gridid"};
static_assert(sizeof(SpecialNames) / sizeof(SpecialNames[0]) ==
                  static_cast<size_t>(Special::Count),
              "special register table out of sync");
} // namespace

DecodeContext::DecodeContext(Module &M, Function &F, uint32_t FuncIndex)
    : M(M), F(F), FuncIndex(FuncIndex) {
  for (const char *Name : SpecialNames)
    F.Regs.push_back({Name, Type::U32});
}

void DecodeContext::addRegister(const std::string &Name, Type Ty) {
  Scopes.back()[Name] = static_cast<int32_t>(F.Regs.size());
  F.Regs.push_back({Name, Ty});
}

int32_t DecodeContext::lookupRegister(const std::string &Name) const {
  for (auto It = Scopes.rbegin(); It != Scopes.rend(); ++It) {
    auto Found = It->find(Name);
    if (Found != It->end())
      return Found->second;
  }
  for (size_t I = 0; I < static_cast<size_t>(Special::Count); ++I)
    if (Name == SpecialNames[I])
      return static_cast<int32_t>(I);
  // The bare forms of 1-D specials.
  if (Name == "%tid" || Name == "%ntid" || Name == "%ctaid" ||
      Name == "%nctaid")
    return lookupRegister(Name + ".x");
  return -1;
}

bool DecodeContext::resolveLabels(std::string &Err) {
  for (const PendingLabel &P : Pending) {
    auto It = Labels.find(P.Name);
    if (It == Labels.end()) {
      Err = "PTX parse error at line " + std::to_string(P.Line) +
            ": unknown label '" + P.Name + "'";
      return false;
    }
    F.Code[P.Inst].Ops[P.Op].Value = It->second;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Instruction decoding
//===----------------------------------------------------------------------===//

namespace kvq::ptx {

/// Decodes one instruction. Methods return false for malformed text (Err
/// set); unsupported features are recorded in Note instead.
class InstructionDecoder {
public:
  InstructionDecoder(DecodeContext &Ctx, const RawInstruction &Raw,
                     std::string &Err)
      : Ctx(Ctx), Raw(Raw), Err(Err) {}

  bool run();

private:
  DecodeContext &Ctx;
  const RawInstruction &Raw;
  std::string &Err;
  Instruction I;
  std::string Note;
  std::vector<Type> Types;
  std::vector<std::string> Words; // Opcode-specific modifiers, in order.
  /// ldmatrix/mma: the shape word and the .row/.col layout words seen.
  std::string Shape, Layout;
  /// cp.async: .cg (16-byte copies only) and .L2::cache_hint (a trailing
  /// cache-policy operand).
  bool CacheGlobal = false, CacheHint = false;

  bool malformed(const std::string &Msg) {
    Err = "PTX parse error at line " + std::to_string(Raw.Line) + ": " + Msg +
          " in '" + Raw.Text + "'";
    return false;
  }
  void unsupported(const std::string &Msg) {
    if (Note.empty())
      Note = Msg;
  }
  void classifyModifiers(const std::vector<std::string> &Mods);
  void decodeCall();
  bool setOpcode(const std::string &Base);
  size_t setCpAsyncOpcode(const std::vector<std::string> &Parts);
  void checkCpAsync();
  void checkLdmatrix();
  void checkMma();
  void applyWords();
  bool parseOperand(const std::vector<Token> &Toks, unsigned Index);
  bool parseAddress(const std::vector<Token> &Toks, Operand &Op,
                    unsigned Index);
  bool resolveSymbol(const std::string &Name, int64_t &Value, Space &Sp,
                     unsigned Index);
  Type immediateType(unsigned Index) const;
  void checkOperandCount();
  void setClass();
};

} // namespace kvq::ptx

/// Cache, eviction, scope and ordering qualifiers: no effect on results in a
/// sequential interpreter.
static bool isIgnoredModifier(const std::string &W) {
  static const char *const Ignored[] = {"ca",
                                        "cg",
                                        "cs",
                                        "lu",
                                        "cv",
                                        "wb",
                                        "wt",
                                        "nc",
                                        "weak",
                                        "relaxed",
                                        "acquire",
                                        "release",
                                        "acq_rel",
                                        "sc",
                                        "cta",
                                        "gpu",
                                        "sys",
                                        "aligned",
                                        "sync",
                                        "volatile",
                                        "gl",
                                        "L1::evict_last",
                                        "L1::evict_first",
                                        "L1::no_allocate",
                                        "L2::64B",
                                        "L2::128B",
                                        "L2::256B",
                                        "L1::evict_normal",
                                        "L1::evict_unchanged",
                                        "L2::cache_hint",
                                        "shared::cta",
                                        "uni",
                                        "noftz",
                                        "mmio",
                                        "cluster"};
  for (const char *S : Ignored)
    if (W == S)
      return true;
  return false;
}

void InstructionDecoder::classifyModifiers(
    const std::vector<std::string> &Mods) {
  for (const std::string &W : Mods) {
    Type Ty = parseTypeName(W);
    if (Ty != Type::None) {
      Types.push_back(Ty);
      continue;
    }
    struct {
      const char *Name;
      RoundingMode Mode;
      bool Int;
    } static const Rounds[] = {{"rn", RoundingMode::NearestEven, false},
                               {"rz", RoundingMode::TowardZero, false},
                               {"rm", RoundingMode::Down, false},
                               {"rp", RoundingMode::Up, false},
                               {"rna", RoundingMode::NearestAway, false},
                               {"rni", RoundingMode::NearestEven, true},
                               {"rzi", RoundingMode::TowardZero, true},
                               {"rmi", RoundingMode::Down, true},
                               {"rpi", RoundingMode::Up, true}};
    bool Matched = false;
    for (const auto &R : Rounds)
      if (W == R.Name) {
        I.Rnd = R.Mode;
        I.Flags |= FlagRound | (R.Int ? FlagIntRound : 0);
        Matched = true;
      }
    if (Matched)
      continue;
    if (W == "ftz")
      I.Flags |= FlagFtz;
    else if (W == "sat" || W == "satfinite")
      I.Flags |= FlagSat;
    else if (W == "approx")
      I.Flags |= FlagApprox;
    else if (W == "full")
      I.Flags |= FlagFull | FlagApprox;
    else if (W == "relu")
      I.Flags |= FlagRelu;
    else if (W == "NaN")
      I.Flags |= FlagNaN;
    else if (W == "cc")
      I.Flags |= FlagCC;
    else if (W == "to")
      I.Flags |= FlagToSpace;
    else if (W == "global")
      I.Sp = Space::Global;
    else if (W == "shared" || W == "shared::cta")
      I.Sp = Space::Shared;
    else if (W == "local")
      I.Sp = Space::Local;
    else if (W == "const")
      I.Sp = Space::Const;
    else if (W == "param")
      I.Sp = Space::Param;
    else if (W == "v2" || W == "v4")
      I.VecWidth = W[1] - '0';
    else if (W == "uni" && I.Op == Opcode::Bra)
      I.Flags |= FlagUni;
    else if (W == "volatile" || W == "nc")
      I.Flags |= FlagVolatile;
    else if (!isIgnoredModifier(W))
      Words.push_back(W);
  }
}

bool InstructionDecoder::setOpcode(const std::string &B) {
  static const struct {
    const char *Name;
    Opcode Op;
  } Table[] = {
      {"add", Opcode::Add},
      {"sub", Opcode::Sub},
      {"mul", Opcode::Mul},
      {"mad", Opcode::Mad},
      {"addc", Opcode::Add},
      {"subc", Opcode::Sub},
      {"madc", Opcode::Mad},
      {"fma", Opcode::Fma},
      {"div", Opcode::Div},
      {"rem", Opcode::Rem},
      {"abs", Opcode::Abs},
      {"neg", Opcode::Neg},
      {"min", Opcode::Min},
      {"max", Opcode::Max},
      {"mul24", Opcode::Mul24},
      {"mad24", Opcode::Mad24},
      {"sad", Opcode::Sad},
      {"popc", Opcode::Popc},
      {"clz", Opcode::Clz},
      {"bfind", Opcode::Bfind},
      {"brev", Opcode::Brev},
      {"bfe", Opcode::Bfe},
      {"bfi", Opcode::Bfi},
      {"fns", Opcode::Fns},
      {"shl", Opcode::Shl},
      {"shr", Opcode::Shr},
      {"shf", Opcode::Shf},
      {"and", Opcode::And},
      {"or", Opcode::Or},
      {"xor", Opcode::Xor},
      {"not", Opcode::Not},
      {"cnot", Opcode::Cnot},
      {"lop3", Opcode::Lop3},
      {"prmt", Opcode::Prmt},
      {"dp4a", Opcode::Dp4a},
      {"dp2a", Opcode::Dp2a},
      {"copysign", Opcode::Copysign},
      {"testp", Opcode::Testp},
      {"rcp", Opcode::Rcp},
      {"sqrt", Opcode::Sqrt},
      {"rsqrt", Opcode::Rsqrt},
      {"sin", Opcode::Sin},
      {"cos", Opcode::Cos},
      {"lg2", Opcode::Lg2},
      {"ex2", Opcode::Ex2},
      {"tanh", Opcode::Tanh},
      {"setp", Opcode::Setp},
      {"set", Opcode::Set},
      {"selp", Opcode::Selp},
      {"slct", Opcode::Slct},
      {"mov", Opcode::Mov},
      {"ld", Opcode::Ld},
      {"ldu", Opcode::Ld},
      {"st", Opcode::St},
      {"cvta", Opcode::Cvta},
      {"cvt", Opcode::Cvt},
      {"prefetch", Opcode::Prefetch},
      {"prefetchu", Opcode::Prefetch},
      {"bra", Opcode::Bra},
      {"ret", Opcode::Ret},
      {"exit", Opcode::Exit},
      {"trap", Opcode::Trap},
      {"bar", Opcode::Bar},
      {"barrier", Opcode::Bar},
      {"membar", Opcode::Membar},
      {"fence", Opcode::Membar},
      {"shfl", Opcode::Shfl},
      {"vote", Opcode::Vote},
      {"redux", Opcode::Redux},
      {"activemask", Opcode::Activemask},
      {"atom", Opcode::Atom},
      {"red", Opcode::Red},
      {"nanosleep", Opcode::Nanosleep},
      {"call", Opcode::Call},
      {"ldmatrix", Opcode::Ldmatrix},
      {"mma", Opcode::Mma},
  };
  for (const auto &E : Table)
    if (B == E.Name) {
      I.Op = E.Op;
      if (B == "addc" || B == "subc" || B == "madc")
        I.Flags |= FlagCarryIn;
      return true;
    }
  I.Op = Opcode::Unsupported;
  unsupported("unsupported instruction '" + B + "'");
  return true;
}

/// Interprets the opcode-specific modifier words.
void InstructionDecoder::applyWords() {
  static const char *const Cmps[] = {"eq",  "ne",  "lt",  "le",  "gt",  "ge",
                                     "lo",  "ls",  "hi",  "hs",  "equ", "neu",
                                     "ltu", "leu", "gtu", "geu", "num", "nan"};
  auto IndexOf = [](const std::string &W, const char *const *List,
                    size_t N) -> int {
    for (size_t K = 0; K < N; ++K)
      if (W == List[K])
        return static_cast<int>(K);
    return -1;
  };
  for (const std::string &W : Words) {
    int K;
    switch (I.Op) {
    case Opcode::Setp:
    case Opcode::Set:
      if ((K = IndexOf(W, Cmps, 18)) >= 0)
        I.Cmp = static_cast<CmpOp>(K);
      else if (W == "and")
        I.Combine = BoolOp::And;
      else if (W == "or")
        I.Combine = BoolOp::Or;
      else if (W == "xor")
        I.Combine = BoolOp::Xor;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Dp2a:
    case Opcode::Mul:
    case Opcode::Mad:
    case Opcode::Mul24:
    case Opcode::Mad24:
      if (W == "lo")
        I.Sub = sub::Lo;
      else if (W == "hi")
        I.Sub = sub::Hi;
      else if (W == "wide")
        I.Sub = sub::Wide;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Shfl: {
      static const char *const Modes[] = {"up", "down", "bfly", "idx"};
      if ((K = IndexOf(W, Modes, 4)) >= 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Vote: {
      static const char *const Modes[] = {"all", "any", "uni", "ballot"};
      if ((K = IndexOf(W, Modes, 4)) >= 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Atom:
    case Opcode::Red: {
      static const char *const Ops[] = {"add", "min", "max", "exch", "cas",
                                        "and", "or",  "xor", "inc",  "dec"};
      if ((K = IndexOf(W, Ops, 10)) >= 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Redux: {
      static const char *const Ops[] = {"add", "min", "max",
                                        "and", "or",  "xor"};
      if ((K = IndexOf(W, Ops, 6)) >= 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Bar:
      if (W == "arrive")
        I.Op = Opcode::BarArrive;
      else if (W == "red")
        I.Op = Opcode::BarRed;
      else if (W == "warp")
        I.Op = Opcode::BarWarpSync;
      else if (W == "all")
        continue; // barrier.cta.sync.aligned.all: the count-less form.
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::BarRed:
      if (W == "popc")
        I.Sub = sub::BPopc;
      else if (W == "and")
        I.Sub = sub::BAnd;
      else if (W == "or")
        I.Sub = sub::BOr;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Bfind:
      if (W == "shiftamt")
        I.Sub = 1;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Testp: {
      static const char *const Ops[] = {"finite",     "infinite", "number",
                                        "notanumber", "normal",   "subnormal"};
      if ((K = IndexOf(W, Ops, 6)) >= 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Shf:
      if (W == "l")
        I.Sub &= ~2;
      else if (W == "r")
        I.Sub |= 2;
      else if (W == "wrap")
        I.Sub |= 1;
      else if (W != "clamp")
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Prmt: {
      static const char *const Modes[] = {"",    "f4e", "b4e", "rc8",
                                          "ecl", "ecr", "rc16"};
      if ((K = IndexOf(W, Modes, 7)) > 0)
        I.Sub = K;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    }
    case Opcode::Membar:
    case Opcode::Prefetch:
      continue; // Scopes and levels: no effect.
    case Opcode::Ldmatrix:
      if (W == "x1" || W == "x2" || W == "x4")
        I.VecWidth = W[1] - '0';
      else if (W == "trans")
        I.Sub = 1;
      else if (Shape.empty() && W[0] == 'm')
        Shape = W;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    case Opcode::Mma:
      if (W == "row" || W == "col")
        Layout += "." + W;
      else if (Shape.empty() && W[0] == 'm')
        Shape = W;
      else
        unsupported("unsupported modifier ." + W);
      continue;
    default:
      unsupported("unsupported modifier ." + W);
    }
  }
}

bool InstructionDecoder::resolveSymbol(const std::string &Name, int64_t &Value,
                                       Space &Sp, unsigned Index) {
  uint32_t InstIndex = static_cast<uint32_t>(Ctx.F.Code.size());
  auto Local = Ctx.LocalSymbols.find(Name);
  const Variable *V = nullptr;
  if (Local != Ctx.LocalSymbols.end())
    V = &Local->second;
  for (const std::vector<Param> *List : {&Ctx.F.Params, &Ctx.F.Returns})
    for (const Param &P : *List)
      if (!V && P.Name == Name) {
        Value = P.Offset;
        Sp = Ctx.F.IsEntry ? Space::Param : Space::ThreadParam;
        return true;
      }
  if (!V)
    for (const Variable &MV : Ctx.M.Variables)
      if (MV.Name == Name)
        V = &MV;
  if (!V) {
    unsupported("unknown symbol '" + Name + "'");
    return true;
  }
  Sp = V->Sp;
  if (V->Sp == Space::Shared && V->Offset == ~0ull) {
    Value = 0;
    Ctx.M.DynamicSharedRelocs.push_back(
        {Ctx.FuncIndex, InstIndex, static_cast<uint8_t>(Index)});
    return true;
  }
  Value = static_cast<int64_t>(V->Offset);
  if (V->Sp == Space::Global)
    Ctx.M.GlobalRelocs.push_back(
        {Ctx.FuncIndex, InstIndex, static_cast<uint8_t>(Index)});
  return true;
}

/// The type an immediate in operand Index is converted to.
Type InstructionDecoder::immediateType(unsigned Index) const {
  if (I.Op == Opcode::Cvt && Index == 1)
    return I.Ty2;
  // set.cmp.dtype.stype compares stype operands; slct.dtype.stype selects
  // between dtype operands by an stype one.
  if (I.Op == Opcode::Set && (Index == 1 || Index == 2))
    return I.Ty2;
  if (I.Op == Opcode::Slct && Index == 3)
    return I.Ty2;
  return I.Ty;
}

bool InstructionDecoder::parseAddress(const std::vector<Token> &T, Operand &Op,
                                      unsigned Index) {
  // [ base (+|-) offset ] where base is a register, a symbol or a number.
  size_t K = 1, N = T.size() - 1;
  if (N < 2 || !T.back().is(']'))
    return malformed("bad address");
  Op.K = Operand::Mem;
  bool HaveBase = false;
  int Sign = 1;
  for (; K < N; ++K) {
    const Token &Tok = T[K];
    if (Tok.is('+')) {
      continue;
    }
    if (Tok.is('-')) {
      Sign = -Sign;
      continue;
    }
    if (Tok.K == Token::Number) {
      Immediate Imm;
      if (!parseImmediate(Tok.Text, Imm) || Imm.K != Immediate::Int)
        return malformed("bad address offset");
      Op.Value += Sign * static_cast<int64_t>(Imm.Bits);
      Sign = 1;
      continue;
    }
    if (Tok.K != Token::Ident || HaveBase)
      return malformed("bad address");
    HaveBase = true;
    int32_t R = Ctx.lookupRegister(Tok.Text);
    if (R >= 0) {
      Op.RegIdx = R;
      continue;
    }
    int64_t V = 0;
    Space Sp = Space::Generic;
    if (!resolveSymbol(Tok.Text, V, Sp, Index))
      return false;
    Op.Value += V;
    if (I.Sp == Space::Generic && Sp != Space::Generic && Note.empty())
      I.Sp = Sp; // ld [sym] without a space names the symbol's space.
    if (I.Sp == Space::Param && Sp == Space::ThreadParam)
      I.Sp = Sp; // A .func's own parameters or a call sequence's slots.
  }
  return true;
}

bool InstructionDecoder::parseOperand(const std::vector<Token> &T,
                                      unsigned Index) {
  if (Index >= 6)
    return malformed("too many operands");
  Operand &Op = I.Ops[Index];
  if (T.empty())
    return malformed("empty operand");
  if (T[0].is('[')) {
    return parseAddress(T, Op, Index);
  }
  if (T[0].is('{')) {
    Op.K = Operand::Vec;
    for (size_t K = 1; K + 1 < T.size(); ++K) {
      if (T[K].is(','))
        continue;
      if (Op.VecCount == 4) {
        unsupported("vectors of more than 4 elements are not supported");
        return true;
      }
      if (T[K].K == Token::Number) {
        Immediate Imm;
        // Integers and f32 bit patterns (0f...): LLVM stores constants so.
        if (!parseImmediate(T[K].Text, Imm) ||
            (Imm.K != Immediate::Int && Imm.K != Immediate::F32Bits))
          return malformed("bad vector element '" + T[K].Text + "'");
        Op.ImmMask |= 1 << Op.VecCount;
        Op.Elems[Op.VecCount++] = static_cast<int32_t>(Imm.Bits);
        continue;
      }
      int32_t R = T[K].Text == "_" ? -1 : Ctx.lookupRegister(T[K].Text);
      if (R < 0 && T[K].Text != "_")
        return malformed("unknown register '" + T[K].Text + "'");
      Op.Elems[Op.VecCount++] = R;
    }
    return true;
  }
  if (T[0].is('(')) {
    unsupported("function calls are not supported");
    return true;
  }
  size_t K = 0;
  if (T[0].is('!')) {
    Op.Negate = true;
    K = 1;
  }
  bool Negative = false;
  if (K < T.size() && T[K].is('-')) {
    Negative = true;
    ++K;
  }
  if (K >= T.size())
    return malformed("bad operand");
  const Token &Main = T[K];
  if (Main.K == Token::Number) {
    Immediate Imm;
    if (!parseImmediate(Main.Text, Imm))
      return malformed("bad number '" + Main.Text + "'");
    Op.K = Operand::Imm;
    Op.Value = static_cast<int64_t>(
        immediateBits(Imm, immediateType(Index), Negative));
    return true;
  }
  if (Main.K != Token::Ident)
    return malformed("bad operand");
  int32_t R = Ctx.lookupRegister(Main.Text);
  if (R >= 0) {
    Op.K = Operand::Reg;
    Op.RegIdx = R;
    if (K + 2 < T.size() && T[K + 1].is('|')) { // d|p
      Op.Elems[0] = Ctx.lookupRegister(T[K + 2].Text);
      if (Op.Elems[0] < 0)
        return malformed("unknown register '" + T[K + 2].Text + "'");
    }
    return true;
  }
  if (Main.Text[0] == '%') {
    // Special registers the interpreter does not model are legal PTX and
    // fail only when executed; any other unknown name is an error.
    static const char *const Unmodeled[] = {"%clock",
                                            "%globaltimer",
                                            "%pm",
                                            "%envreg",
                                            "%cluster",
                                            "%nsmid",
                                            "%dynamic_smem_size",
                                            "%total_smem_size",
                                            "%aggr_smem_size",
                                            "%nclusterid",
                                            "%is_explicit_cluster",
                                            "%reserved_smem",
                                            "%current_graph_exec"};
    for (const char *U : Unmodeled)
      if (Main.Text.rfind(U, 0) == 0) {
        unsupported("unsupported special register '" + Main.Text + "'");
        return true;
      }
    return malformed("unknown register '" + Main.Text + "'");
  }
  if (I.Op == Opcode::Bra) {
    Op.K = Operand::Label;
    Ctx.Pending.push_back({static_cast<uint32_t>(Ctx.F.Code.size()),
                           static_cast<uint8_t>(Index), Main.Text, Raw.Line});
    return true;
  }
  // A symbol's address, optionally plus an offset.
  Op.K = Operand::Imm;
  Space Sp = Space::Generic;
  if (!resolveSymbol(Main.Text, Op.Value, Sp, Index))
    return false;
  if (K + 2 < T.size() && T[K + 1].is('+') && T[K + 2].K == Token::Number)
    Op.Value += std::strtoll(T[K + 2].Text.c_str(), nullptr, 0);
  return true;
}

/// `call{.uni} {(ret),} name{, (args)};`: only direct calls whose arguments
/// are .param variables of a call sequence, as LLVM and nvcc emit them.
void InstructionDecoder::decodeCall() {
  CallSite Site;
  bool HaveName = false;
  for (const std::vector<Token> &Group : Raw.Operands) {
    if (Group.empty())
      continue;
    if (Group[0].is('(')) {
      std::vector<uint32_t> &Slots =
          HaveName ? Site.ArgOffsets : Site.RetOffsets;
      for (size_t K = 1; K + 1 < Group.size(); ++K) {
        if (Group[K].is(','))
          continue;
        auto It = Ctx.LocalSymbols.find(Group[K].Text);
        if (It == Ctx.LocalSymbols.end() ||
            It->second.Sp != Space::ThreadParam) {
          unsupported("call arguments must be .param variables");
          return;
        }
        Slots.push_back(static_cast<uint32_t>(It->second.Offset));
      }
      continue;
    }
    if (HaveName || Group.size() != 1 || Group[0].K != Token::Ident ||
        Ctx.lookupRegister(Group[0].Text) >= 0) {
      unsupported("indirect calls are not supported");
      return;
    }
    Site.CalleeName = Group[0].Text;
    HaveName = true;
  }
  if (!HaveName) {
    unsupported("call without a target");
    return;
  }
  I.NumOps = 1;
  I.Ops[0].K = Operand::Imm;
  I.Ops[0].Value = static_cast<int64_t>(Ctx.F.Calls.size());
  Ctx.F.Calls.push_back(std::move(Site));
}

void InstructionDecoder::checkOperandCount() {
  unsigned Want = 0, Alt = 0;
  switch (I.Op) {
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::Trap:
  case Opcode::Membar:
    Want = 0;
    break;
  case Opcode::Bra:
  case Opcode::BarWarpSync:
  case Opcode::Activemask:
  case Opcode::Nanosleep:
  case Opcode::Prefetch:
    Want = 1;
    break;
  case Opcode::Bar:
  case Opcode::BarArrive:
    Want = 1;
    Alt = 2;
    break;
  case Opcode::Abs:
  case Opcode::Neg:
  case Opcode::Popc:
  case Opcode::Clz:
  case Opcode::Bfind:
  case Opcode::Brev:
  case Opcode::Not:
  case Opcode::Cnot:
  case Opcode::Rcp:
  case Opcode::Sqrt:
  case Opcode::Rsqrt:
  case Opcode::Sin:
  case Opcode::Cos:
  case Opcode::Lg2:
  case Opcode::Ex2:
  case Opcode::Tanh:
  case Opcode::Mov:
  case Opcode::Ld:
  case Opcode::St:
  case Opcode::Cvta:
  case Opcode::Testp:
    Want = 2;
    break;
  case Opcode::Cvt:
    Want = 2;
    Alt = 3;
    break;
  case Opcode::Setp:
    Want = I.Combine == BoolOp::None ? 3 : 4;
    break;
  case Opcode::Redux:
  case Opcode::Red:
  case Opcode::Copysign:
    Want = 3;
    break;
  case Opcode::Vote:
    Want = 3;
    break;
  case Opcode::Atom:
    Want = I.Sub == sub::ACas ? 4 : 3;
    break;
  case Opcode::BarRed:
    Want = 3;
    Alt = 4;
    break;
  case Opcode::CpAsyncCommit:
    Want = 0;
    break;
  case Opcode::CpAsyncWait:
    Want = I.Sub ? 0 : 1;
    break;
  case Opcode::Ldmatrix:
    Want = 2;
    break;
  case Opcode::CpAsync:
    Want = CacheHint ? 4 : 3;
    Alt = Want + 1;
    break;
  case Opcode::Fma:
  case Opcode::Mad:
  case Opcode::Mad24:
  case Opcode::Sad:
  case Opcode::Mma:
  case Opcode::Selp:
  case Opcode::Slct:
  case Opcode::Bfe:
  case Opcode::Fns:
  case Opcode::Shf:
  case Opcode::Prmt:
  case Opcode::Dp4a:
  case Opcode::Dp2a:
    Want = 4;
    break;
  case Opcode::Bfi:
  case Opcode::Lop3:
  case Opcode::Shfl:
    Want = 5;
    break;
  case Opcode::Set:
    Want = I.Combine == BoolOp::None ? 3 : 4;
    break;
  case Opcode::Unsupported:
    return;
  default:
    Want = 3;
  }
  if (I.NumOps != Want && (Alt == 0 || I.NumOps != Alt))
    unsupported("unexpected operand count " + std::to_string(I.NumOps));
}

void InstructionDecoder::setClass() {
  switch (I.Op) {
  case Opcode::Mov:
  case Opcode::Selp:
  case Opcode::Slct:
  case Opcode::Cvta:
    I.Class = InstClass::Move;
    break;
  case Opcode::Ld:
  case Opcode::St:
  case Opcode::Prefetch:
  case Opcode::CpAsync:
  case Opcode::Ldmatrix:
    I.Class = InstClass::Memory;
    break;
  case Opcode::Mma:
    I.Class = InstClass::Matrix;
    break;
  case Opcode::Cvt:
    I.Class = InstClass::Conversion;
    break;
  case Opcode::Bra:
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::Trap:
  case Opcode::Unsupported:
  case Opcode::Call:
    I.Class = InstClass::Control;
    break;
  case Opcode::Bar:
  case Opcode::BarArrive:
  case Opcode::BarRed:
  case Opcode::BarWarpSync:
  case Opcode::Membar:
  case Opcode::Shfl:
  case Opcode::Vote:
  case Opcode::Redux:
  case Opcode::Activemask:
  case Opcode::Atom:
  case Opcode::Red:
  case Opcode::Nanosleep:
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWait:
    I.Class = InstClass::Sync;
    break;
  case Opcode::Rcp:
  case Opcode::Sqrt:
  case Opcode::Rsqrt:
  case Opcode::Sin:
  case Opcode::Cos:
  case Opcode::Lg2:
  case Opcode::Ex2:
  case Opcode::Tanh:
  case Opcode::Copysign:
  case Opcode::Testp:
    I.Class = InstClass::Float;
    break;
  case Opcode::Setp:
  case Opcode::Set:
    I.Class = isFloat(I.Ty) ? InstClass::Float : InstClass::Integer;
    break;
  default:
    I.Class = isFloat(I.Ty) ? InstClass::Float : InstClass::Integer;
  }
}

bool InstructionDecoder::run() {
  I.Line = Raw.Line;
  std::vector<std::string> Parts;
  size_t Start = 0;
  const std::string &S = Raw.Opcode;
  // Split at '.', keeping "::" sub-qualifiers (L2::128B) inside a part.
  for (size_t K = 0; K <= S.size(); ++K)
    if (K == S.size() || S[K] == '.') {
      Parts.push_back(S.substr(Start, K - Start));
      Start = K + 1;
    }
  size_t FirstModifier = 1;
  if (Parts[0] == "cp")
    FirstModifier = setCpAsyncOpcode(Parts);
  else
    setOpcode(Parts[0]);
  classifyModifiers({Parts.begin() + FirstModifier, Parts.end()});
  applyWords();
  if (!Types.empty())
    I.Ty = Types[0];
  if (Types.size() > 1)
    I.Ty2 = Types[1];
  if (I.Op == Opcode::Mma && Types.size() == 4)
    I.Ty3 = Types[2];
  else if (Types.size() > 2)
    unsupported("too many type modifiers");
  if (I.Op == Opcode::Setp) {
    // setp has a single (comparison) type.
    I.Ty2 = I.Ty;
  }
  if (!Raw.Guard.empty()) {
    I.Pred = Ctx.lookupRegister(Raw.Guard);
    I.PredNegate = Raw.GuardNegated;
    if (I.Pred < 0)
      return malformed("unknown guard predicate '" + Raw.Guard + "'");
  }
  if (I.Flags & (FlagCC | FlagCarryIn)) {
    // The condition code's carry flag lives in a hidden register.
    if (typeBits(I.Ty) != 32 && typeBits(I.Ty) != 64)
      unsupported("carry arithmetic needs a 32- or 64-bit type");
    I.Ops[5].K = Operand::Reg;
    I.Ops[5].RegIdx = Ctx.carryRegister();
  }
  if (I.Op == Opcode::Call) {
    decodeCall();
  } else {
    for (size_t K = 0; K < Raw.Operands.size(); ++K)
      if (!parseOperand(Raw.Operands[K], static_cast<unsigned>(K)))
        return false;
    I.NumOps = static_cast<uint8_t>(Raw.Operands.size());
    checkOperandCount();
    if (I.Op == Opcode::CpAsync)
      checkCpAsync();
    else if (I.Op == Opcode::Ldmatrix)
      checkLdmatrix();
    else if (I.Op == Opcode::Mma)
      checkMma();
  }
  if (!Note.empty())
    I.Op = Opcode::Unsupported;
  setClass();
  Ctx.F.Code.push_back(I);
  Ctx.F.Text.push_back(Raw.Text);
  Ctx.F.Notes.push_back(Note);
  return true;
}

bool DecodeContext::decode(const RawInstruction &Raw, std::string &Err) {
  InstructionDecoder D(*this, Raw, Err);
  return D.run();
}

//===----------------------------------------------------------------------===//
// cp.async, ldmatrix, mma
//===----------------------------------------------------------------------===//

/// cp.async{.ca,.cg}.shared{::cta}.global{.L2::...}, cp.async.commit_group,
/// cp.async.wait_group, cp.async.wait_all. Returns the index of the first
/// modifier after the opcode words.
size_t
InstructionDecoder::setCpAsyncOpcode(const std::vector<std::string> &Parts) {
  I.Op = Opcode::Unsupported;
  if (Parts.size() < 3 || Parts[1] != "async") {
    unsupported("unsupported instruction '" + Raw.Opcode + "'");
    return Parts.size();
  }
  const std::string &Kind = Parts[2];
  if (Kind == "commit_group" || Kind == "wait_group" || Kind == "wait_all") {
    I.Op = Kind == "commit_group" ? Opcode::CpAsyncCommit : Opcode::CpAsyncWait;
    I.Sub = Kind == "wait_all";
    return 3;
  }
  if (Kind != "ca" && Kind != "cg") {
    // cp.async.bulk, cp.async.mbarrier.arrive, ...
    unsupported("unsupported instruction 'cp.async." + Kind + "'");
    return Parts.size();
  }
  I.Op = Opcode::CpAsync;
  CacheGlobal = Kind == "cg";
  bool Shared = false, Global = false;
  for (size_t K = 3; K < Parts.size(); ++K) {
    Shared |= Parts[K] == "shared" || Parts[K] == "shared::cta";
    Global |= Parts[K] == "global";
    CacheHint |= Parts[K] == "L2::cache_hint";
  }
  if (!Shared || !Global)
    unsupported("cp.async needs .shared.global");
  return 3;
}

void InstructionDecoder::checkCpAsync() {
  const Operand &Size = I.Ops[2];
  if (I.Ops[0].K != Operand::Mem || I.Ops[1].K != Operand::Mem)
    return unsupported("cp.async needs [dst] and [src] addresses");
  if (Size.K != Operand::Imm ||
      (Size.Value != 4 && Size.Value != 8 && Size.Value != 16))
    return unsupported("cp.async cp-size must be 4, 8 or 16");
  if (CacheGlobal && Size.Value != 16)
    return unsupported("cp.async.cg needs cp-size 16");
  I.Sub = sub::SrcFull;
  if (I.NumOps == (CacheHint ? 5 : 4)) {
    const Operand &Src = I.Ops[3];
    bool Pred = Src.K == Operand::Reg &&
                Ctx.F.Regs[static_cast<size_t>(Src.RegIdx)].Ty == Type::Pred;
    I.Sub = Pred ? sub::SrcIgnore : sub::SrcSize;
    if (!Pred && Src.K == Operand::Imm &&
        static_cast<uint64_t>(Src.Value) > static_cast<uint64_t>(Size.Value))
      unsupported("cp.async src-size exceeds cp-size");
  }
  I.Sp = Space::Shared;
}

void InstructionDecoder::checkLdmatrix() {
  if (Shape != "m8n8" || I.Ty != Type::B16)
    return unsupported("ldmatrix supports only .m8n8 with .b16");
  if (I.VecWidth != 1 && I.VecWidth != 2 && I.VecWidth != 4)
    return unsupported("ldmatrix needs .x1, .x2 or .x4");
  const Operand &D = I.Ops[0];
  unsigned Count = D.K == Operand::Vec ? D.VecCount : 1;
  if ((D.K != Operand::Vec && D.K != Operand::Reg) || D.ImmMask ||
      Count != I.VecWidth)
    return unsupported("ldmatrix needs one destination register per matrix");
  if (I.Ops[1].K != Operand::Mem)
    return unsupported("ldmatrix needs an address operand");
  if (I.Sp != Space::Shared && I.Sp != Space::Generic)
    return unsupported("ldmatrix reads shared memory");
}

void InstructionDecoder::checkMma() {
  MmaShape S;
  unsigned M = 0, N = 0;
  if (std::sscanf(Shape.c_str(), "m%un%uk%u", &M, &N, &S.K) != 3 || M != 16 ||
      N != 8)
    return unsupported("unsupported mma shape ." + Shape +
                       " (supported: m16n8k8, m16n8k16, m16n8k32)");
  if (Layout != ".row.col")
    return unsupported("mma needs .row.col layouts");
  if (Types.size() != 4 || Types[3] != Types[0])
    return unsupported("mma needs .dtype.atype.btype.ctype with ctype = dtype");
  S.Acc = I.Ty;
  S.A = I.Ty2;
  S.B = I.Ty3;
  S.Saturate = I.has(FlagSat);
  std::string Why = checkMmaShape(S);
  if (!Why.empty())
    return unsupported(Why);
  unsigned Want[4] = {MmaShape::AccRegs, S.aRegs(), S.bRegs(),
                      MmaShape::AccRegs};
  for (unsigned K = 0; K < 4; ++K) {
    const Operand &O = I.Ops[K];
    if (O.K != Operand::Vec || O.VecCount != Want[K] || (K == 0 && O.ImmMask))
      return unsupported("mma operand " + std::to_string(K) + " needs " +
                         std::to_string(Want[K]) + " registers");
  }
  I.Sub = static_cast<uint8_t>(S.K);
}
