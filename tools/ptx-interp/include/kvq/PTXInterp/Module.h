//===- Module.h - Decoded PTX module ---------------------------*- C++ -*-===//
//
// A PTX module after parsing: every instruction is decoded once into a
// compact, fixed-size record (opcode, types, modifiers, operands as register
// indices or immediates, branch targets as instruction indices), so the
// interpreter never looks at text while executing.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_MODULE_H
#define KVQ_PTXINTERP_MODULE_H

#include "kvq/Support/Float.h"
#include "kvq/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvq::ptx {

// The bit-exact float formats (kvq/Support) are the interpreter's own.
using namespace kvq::fp;

using kvq::ErrorCode;
using kvq::Expected;
using kvq::Status;


/// Opcodes. Variants that differ only in modifiers share an opcode.
enum class Opcode : uint8_t {
  // Integer and float arithmetic.
  Add,
  Sub,
  Mul,
  Mad,
  Fma,
  Div,
  Rem,
  Abs,
  Neg,
  Min,
  Max,
  Mul24,
  Mad24,
  Sad,
  Popc,
  Clz,
  Bfind,
  Brev,
  Bfe,
  Bfi,
  Fns,
  Shl,
  Shr,
  Shf,
  And,
  Or,
  Xor,
  Not,
  Cnot,
  Lop3,
  Prmt,
  Dp4a,
  Dp2a,
  Copysign,
  Testp,
  Rcp,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Lg2,
  Ex2,
  Tanh,
  // Comparison and selection.
  Setp,
  Set,
  Selp,
  Slct,
  // Data movement and conversion.
  Mov,
  Ld,
  St,
  Cvta,
  Cvt,
  Prefetch,
  // Control flow.
  Bra,
  Ret,
  Exit,
  Trap,
  // Synchronization and warp-level operations.
  Bar,
  BarArrive,
  BarRed,
  BarWarpSync,
  Membar,
  Shfl,
  Vote,
  Redux,
  Activemask,
  Atom,
  Red,
  Nanosleep,
  // Asynchronous copies and warp-level matrix instructions.
  /// cp.async: Ops = [dst], [src], cp-size{, src-size | ignore-src}; Sub is
  /// an AsyncSrc.
  CpAsync,
  CpAsyncCommit,
  /// cp.async.wait_group N (Ops[0]) and cp.async.wait_all (no operand).
  CpAsyncWait,
  /// ldmatrix.m8n8: VecWidth is the matrix count, Sub 1 for .trans.
  Ldmatrix,
  /// mma.sync.aligned.m16n8k<Sub>.row.col: Ty is D's and C's type, Ty2 A's,
  /// Ty3 B's.
  Mma,
  /// A direct call of a .func; Ops[0].Value indexes Function::Calls.
  Call,
  /// Decoded from text the interpreter does not implement; executing it is
  /// an error (Function::Text holds the instruction, Function::Notes why).
  Unsupported,
};

/// Instruction classes for the per-launch counters.
enum class InstClass : uint8_t {
  Integer,
  Float,
  Conversion,
  Memory,
  Control,
  Sync,
  Move,
  Matrix,
  Count
};
const char *className(InstClass C);

/// Value types; B128 only appears in ld/st.
enum class Type : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  B128,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
  E4M3x2,
  E5M2x2,
};

unsigned typeBits(Type T);
bool isSigned(Type T);
bool isFloat(Type T);
const char *typeName(Type T);

/// State spaces. ThreadParam is the interpreter's name for the per-thread
/// .param storage of device functions: a .func's parameters and return
/// values and the argument slots of call sequences (`{ .param .b32 param0;
/// ... call ... }`); Param is the kernel's read-only parameter buffer.
enum class Space : uint8_t {
  Generic,
  Global,
  Shared,
  Local,
  Const,
  Param,
  ThreadParam
};

/// Comparison operators of setp/set (and the bool combine of .and/.or/.xor).
enum class CmpOp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
};
enum class BoolOp : uint8_t { None, And, Or, Xor };

/// Small per-opcode sub-operations, stored in Instruction::Sub.
namespace sub {
enum MulMode : uint8_t { Lo, Hi, Wide };
enum ShflMode : uint8_t { Up, Down, Bfly, Idx };
enum VoteMode : uint8_t { All, Any, Uni, Ballot };
enum AtomOp : uint8_t {
  AAdd,
  AMin,
  AMax,
  AExch,
  ACas,
  AAnd,
  AOr,
  AXor,
  AInc,
  ADec
};
enum ReduxOp : uint8_t { RAdd, RMin, RMax, RAnd, ROr, RXor };
enum BarRedOp : uint8_t { BPopc, BAnd, BOr };
/// cp.async's optional fourth operand.
enum AsyncSrc : uint8_t { SrcFull, SrcSize, SrcIgnore };
enum TestpOp : uint8_t {
  Finite,
  Infinite,
  Number,
  NotANumber,
  Normal,
  Subnormal
};
enum ShfMode : uint8_t {
  ShfLeftClamp,
  ShfLeftWrap,
  ShfRightClamp,
  ShfRightWrap
};
enum PrmtMode : uint8_t {
  PrmtDefault,
  PrmtF4e,
  PrmtB4e,
  PrmtRc8,
  PrmtEcl,
  PrmtEcr,
  PrmtRc16
};
} // namespace sub

/// Modifier flags (Instruction::Flags).
enum Flag : uint16_t {
  FlagFtz = 1 << 0,
  FlagSat = 1 << 1,      // .sat / .satfinite
  FlagApprox = 1 << 2,   // .approx / .full
  FlagVolatile = 1 << 3, // ld.volatile, ld.nc and friends: no effect here
  FlagUni = 1 << 4,      // bra.uni
  FlagRelu = 1 << 5,
  FlagNaN = 1 << 6,       // min/max.NaN
  FlagFull = 1 << 7,      // div.full
  FlagCC = 1 << 8,        // .cc carry-out: Ops[5] is the carry register
  FlagToSpace = 1 << 9,   // cvta.to.<space>
  FlagIntRound = 1 << 10, // cvt .rni/.rzi/.rmi/.rpi
  FlagRound = 1 << 11,    // an explicit rounding modifier is present
  FlagCarryIn = 1 << 12,  // addc/subc/madc: Ops[5] is the carry register
};

/// Special registers live in reserved slots at the start of every register
/// file, filled when a warp starts.
enum class Special : uint8_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
  NWarpId,
  LanemaskEq,
  LanemaskLt,
  LanemaskLe,
  LanemaskGt,
  LanemaskGe,
  SmId,
  GridId,
  Count
};

struct Operand {
  enum Kind : uint8_t { None, Reg, Imm, Mem, Vec, Label };
  Kind K = None;
  /// Mem: the base register (-1 for an absolute address). Vec: element count.
  uint8_t VecCount = 0;
  /// For predicate operands of setp/selp/bar.red: a leading '!'.
  bool Negate = false;
  /// Vec: elements that are immediates (their value is in Elems).
  uint8_t ImmMask = 0;
  int32_t RegIdx = -1;
  /// Imm: the value's bits. Mem: the byte offset, symbol address included.
  /// Label: the target instruction index.
  int64_t Value = 0;
  /// Vec: element registers; -1 is the sink `_`.
  int32_t Elems[4] = {-1, -1, -1, -1};
};

struct Instruction {
  Opcode Op;
  Type Ty = Type::None;
  /// Second type: cvt's source, setp's... comparison type is Ty.
  Type Ty2 = Type::None;
  /// Third type: mma's B operand.
  Type Ty3 = Type::None;
  Space Sp = Space::Generic;
  RoundingMode Rnd = RoundingMode::NearestEven;
  CmpOp Cmp = CmpOp::Eq;
  BoolOp Combine = BoolOp::None;
  uint8_t Sub = 0;
  /// ld/st/atom vector width (1, 2 or 4).
  uint8_t VecWidth = 1;
  uint8_t NumOps = 0;
  InstClass Class = InstClass::Integer;
  bool PredNegate = false;
  uint16_t Flags = 0;
  int32_t Pred = -1;
  uint32_t Line = 0;
  Operand Ops[6];

  bool has(Flag F) const { return Flags & F; }
};

/// A kernel parameter.
struct Param {
  std::string Name;
  unsigned Size = 0;
  unsigned Align = 1;
  unsigned Offset = 0;
};

/// A direct call: argument and return slots are ThreadParam offsets in the
/// caller's frame.
struct CallSite {
  std::string CalleeName;
  /// Index into Module::Functions; -1 when the module has no body for it.
  int32_t Callee = -1;
  std::vector<uint32_t> ArgOffsets;
  std::vector<uint32_t> RetOffsets;
};

/// A register declared in a function.
struct RegInfo {
  std::string Name;
  Type Ty = Type::B32;
};

struct Function {
  std::string Name;
  bool IsEntry = false;
  std::vector<Param> Params;
  unsigned ParamBytes = 0;
  /// A .func's return values (ThreadParam offsets after its parameters).
  std::vector<Param> Returns;
  /// Bytes of per-thread .param storage: a .func's parameters and returns,
  /// then the argument slots of its call sequences.
  unsigned ThreadParamBytes = 0;
  std::vector<CallSite> Calls;
  /// Register slots: the Special registers come first.
  std::vector<RegInfo> Regs;
  std::vector<Instruction> Code;
  /// Source text of each instruction (for error messages), by index.
  std::vector<std::string> Text;
  /// Why an Unsupported instruction is unsupported, by index (else empty).
  std::vector<std::string> Notes;
  /// Bytes of .local memory per thread.
  unsigned LocalBytes = 0;
  unsigned LocalAlign = 1;
};

/// A module-scope variable in .global, .const or .shared.
struct Variable {
  std::string Name;
  Space Sp = Space::Global;
  unsigned Align = 1;
  uint64_t Size = 0;
  /// Offset in the module's const or shared region, or (for .global) the
  /// offset within the module's global block.
  uint64_t Offset = 0;
  std::vector<uint8_t> Init;
};

/// Layout constants of the interpreter's address spaces. Generic addresses
/// of shared, local and const memory fall in fixed windows; device
/// allocations live at and above GlobalBase.
constexpr uint64_t GlobalBase = 0x0000100000000000ull;
constexpr uint64_t ConstWindow = 0x00007d0000000000ull;
constexpr uint64_t SharedWindow = 0x00007e0000000000ull;
constexpr uint64_t LocalWindow = 0x00007f0000000000ull;
constexpr uint64_t WindowSize = 1ull << 32;

struct Module {
  std::string Version;
  std::string Target;
  std::vector<Function> Functions;
  std::vector<Variable> Variables;
  /// Bytes of the module's static shared region (all .shared variables).
  uint64_t StaticShared = 0;
  /// Offset of dynamic shared memory (`.extern .shared`), aligned.
  uint64_t DynamicSharedOffset = 0;
  /// Size of the module's .global block, allocated when the module is loaded.
  uint64_t GlobalBytes = 0;
  std::vector<uint8_t> ConstData;

  /// Operands holding the address of a .global variable, as an offset into
  /// the module's global block until placeGlobals() adds the block's base.
  struct GlobalReloc {
    uint32_t Func, Inst;
    uint8_t Op;
  };
  std::vector<GlobalReloc> GlobalRelocs;
  /// Operands holding the address of dynamic (`.extern .shared`) shared
  /// memory, as an offset from its start until the static layout is known.
  std::vector<GlobalReloc> DynamicSharedRelocs;

  const Function *findFunction(const std::string &Name) const;
  /// Places the module's .global variables at device address Base.
  void placeGlobals(uint64_t Base);
};

/// Parses and decodes PTX text. Malformed text is an error naming the line;
/// well-formed but unimplemented instructions decode to Opcode::Unsupported
/// and fail only when executed.
Expected<Module> parseModule(const std::string &Text);

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_MODULE_H
