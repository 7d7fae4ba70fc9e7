//===- Execute.cpp - SIMT execution of decoded PTX ------------------------===//
//
// SIMT model: every thread has its own program counter. A warp repeatedly
// picks the smallest PC among its runnable lanes and executes that
// instruction for all runnable lanes sitting at it. For the structured
// control flow compilers emit (merge points after both sides of a branch,
// loop exits after the loop body) this reconverges lanes at the earliest
// common point, like a reconvergence stack, without needing the CFG.
//
// Warp-synchronous instructions (shfl/vote/redux.sync, bar.warp.sync) wait
// until every lane named in the membermask has arrived at the same
// instruction with the same mask; barriers (bar.sync) wait until the
// expected number of threads of the block have arrived. When no lane of any
// warp can run and no barrier can complete, the launch deadlocks and fails.
//
//===----------------------------------------------------------------------===//

#include "Alu.h"
#include "AsyncCopy.h"
#include "MatrixOps.h"
#include "kvq/PTXInterp/Interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unordered_map>

using namespace kvq::ptx;

namespace {

enum class LaneState : uint8_t { Running, AtBarrier, AtWarpSync, Exited };

/// Program counters name a function and an instruction: (function index <<
/// PcShift) | instruction index.
constexpr unsigned PcShift = 24;
constexpr uint32_t PcInstMask = (1u << PcShift) - 1;
/// Device-function calls nest at most this deep (no recursion).
constexpr unsigned MaxCallDepth = 16;
/// Warp instructions a warp runs before the next warp of the block gets a
/// turn, so that a warp spinning on a flag another warp sets terminates.
constexpr unsigned WarpQuantum = 4096;

/// Where a function's registers, .local and per-thread .param storage live
/// within a thread's state. Device functions cannot recurse, so each gets
/// one statically placed frame.
struct FrameInfo {
  uint32_t RegBase = 0;
  uint32_t LocalBase = 0;
  uint32_t ParamBase = 0;
};

/// What a warp's global loads have in flight (LaunchConfig::CountLoadWaits):
/// the registers they are still to write, by index into Warp::R / 32 (every
/// frame's), and their sectors' bytes.
struct LoadScoreboard {
  std::vector<uint8_t> Pending;
  unsigned PendingRegs = 0;
  uint64_t BytesInFlight = 0;
  /// The farthest level a load in flight reads from.
  LoadLevel Farthest = LoadLevel::L1;
  LoadWaitCounts Waits;

  void reset(size_t Registers) {
    Pending.assign(Registers, 0);
    PendingRegs = 0;
    BytesInFlight = 0;
    Farthest = LoadLevel::L1;
    Waits = LoadWaitCounts();
  }
};

struct Warp {
  unsigned Index = 0;
  uint32_t ExistMask = 0; ///< Lanes that are threads of the block.
  uint32_t RunMask = 0;   ///< Lanes in state Running.
  /// When set, every Running lane is at CommonPc and Pc[] is stale for them.
  bool Converged = true;
  uint32_t CommonPc = 0;
  uint32_t Pc[32];
  LaneState State[32];
  uint8_t BarrierId[32];
  uint32_t WaitMask[32];
  uint8_t Depth[32];
  uint32_t ReturnPc[32][MaxCallDepth];
  /// Registers of all frames, lane-minor; Frame points at the frame of the
  /// function being executed.
  std::vector<uint64_t> R;
  uint64_t *Frame = nullptr;
  std::vector<uint8_t> Local;
  std::vector<uint8_t> ThreadParams;
  /// Each lane's pending cp.async copies.
  AsyncCopyQueue Async[32];
  LoadScoreboard Loads;
};

struct Barrier {
  uint32_t Arrived = 0;
  uint32_t Expected = 0;
  uint32_t Popc = 0;
};

enum class Outcome { Next, Handled, Error };

std::string hex(uint64_t V) {
  std::ostringstream OS;
  OS << "0x" << std::hex << V;
  return OS.str();
}

inline unsigned ctz(uint32_t M) { return __builtin_ctz(M); }
inline unsigned popcount(uint32_t M) { return __builtin_popcount(M); }

#define FOR_LANES(L, MASK)                                                     \
  for (uint32_t L##Bits_ = (MASK), L = 0;                                      \
       L##Bits_ && ((L = ctz(L##Bits_)), true); L##Bits_ &= L##Bits_ - 1)

/// The distinct global sectors of a launch: one bit per 32-byte sector, in
/// chunks of 1 MiB of address space allocated on first touch.
class SectorSet {
public:
  /// Adds sector S; true if it was not there.
  bool insert(uint64_t S) {
    if (S >> 15 != LastChunk) {
      LastChunk = S >> 15;
      LastBits = &Chunks[LastChunk];
      if (LastBits->empty())
        LastBits->resize((1 << 15) / 64);
    }
    uint64_t &Word = (*LastBits)[(S >> 6) & ((1 << 9) - 1)];
    uint64_t Bit = uint64_t(1) << (S & 63);
    bool New = !(Word & Bit);
    Word |= Bit;
    return New;
  }
  void clear() {
    Chunks.clear();
    LastChunk = ~uint64_t(0);
    LastBits = nullptr;
  }

private:
  // Element references survive rehashing, so LastBits stays valid.
  std::unordered_map<uint64_t, std::vector<uint64_t>> Chunks;
  uint64_t LastChunk = ~uint64_t(0);
  std::vector<uint64_t> *LastBits = nullptr;
};

class BlockRunner {
public:
  BlockRunner(const Module &M, const Function &F, DeviceMemory &Mem,
              const LaunchConfig &C, Counters &K)
      : M(M), F(F), Mem(Mem), C(C), K(K) {
    Threads = C.Block.X * C.Block.Y * C.Block.Z;
    Warps.resize((Threads + 31) / 32);
    Shared.resize(M.DynamicSharedOffset + C.DynamicSharedBytes);
    layoutFrames();
  }

  Status run(uint32_t X, uint32_t Y, uint32_t Z);

private:
  const Module &M;
  const Function &F;
  DeviceMemory &Mem;
  const LaunchConfig &C;
  Counters &K;
  SectorSet DistinctSectors;
  /// Sectors loads and stores (not prefetches) have touched in the launch
  /// and in the block being run: what a load finds in the L2 and in the
  /// SM's L1 (CountLoadWaits).
  SectorSet DemandSectors, BlockSectors;
  uint32_t Threads = 0;
  uint32_t Cta[3] = {0, 0, 0};
  std::vector<Warp> Warps;
  std::vector<uint8_t> Shared;
  Barrier Bars[16];
  DeviceMemory::Allocation *LastAlloc = nullptr;
  std::string Err;
  uint32_t KernelIndex = 0;
  /// Frames by function index (other kernels' entries are unused).
  std::vector<FrameInfo> Frames;
  uint32_t TotalRegs = 0, TotalLocal = 0, TotalThreadParams = 0;
  /// The function of the instruction being executed.
  uint32_t CurFunc = 0;

  void layoutFrames();
  /// Counts a wait where `I` names a register a global load is still to
  /// write: every load in flight arrives there.
  void waitForLoads(Warp &W, const Instruction &I);
  /// Records the registers of `Data` as written by a global load of
  /// `Sectors` sectors, read from `Level`.
  void issueLoad(Warp &W, const Operand &Data, unsigned N, unsigned Sectors,
                 LoadLevel Level);
  const Function &funcOf(uint32_t Pc) const {
    return M.Functions[Pc >> PcShift];
  }
  uint64_t *frameOf(Warp &W, uint32_t Pc) {
    return W.R.data() + Frames[Pc >> PcShift].RegBase * 32;
  }

  void initWarp(Warp &W, unsigned Index);
  bool runWarp(Warp &W);
  bool fail(const Warp &W, unsigned Lane, uint32_t Pc, const std::string &Msg);
  bool releaseBarriers(bool &Released);
  bool reportDeadlock();

  uint64_t val(const Warp &W, const Operand &O, unsigned L) const {
    return O.K == Operand::Reg ? W.Frame[O.RegIdx * 32 + L]
                               : static_cast<uint64_t>(O.Value);
  }
  /// Lane L's address of a memory operand `[reg + offset]`.
  uint64_t address(const Warp &W, const Operand &M, unsigned L) const {
    return (M.RegIdx >= 0 ? W.Frame[M.RegIdx * 32 + L] : 0) +
           static_cast<uint64_t>(M.Value);
  }
  void set(Warp &W, int32_t Reg, unsigned L, uint64_t V) {
    if (Reg >= 0)
      W.Frame[Reg * 32 + L] = V;
  }
  void materialize(Warp &W) {
    if (!W.Converged)
      return;
    FOR_LANES(L, W.RunMask)
    W.Pc[L] = W.CommonPc;
    W.Converged = false;
  }

  Outcome execute(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Active,
                  uint32_t Exec);
  Outcome execAlu(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Exec);
  bool fastAlu(Warp &W, const Instruction &I, uint32_t Exec);
  void execCarry(Warp &W, const Instruction &I, uint32_t Exec);
  Outcome execMov(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Exec);
  Outcome execCvta(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Exec);
  Outcome execMemory(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Exec);
  Outcome execPrefetch(Warp &W, const Instruction &I, uint32_t Pc,
                       uint32_t Exec);
  Outcome execAtomic(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Exec);
  Outcome execCall(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Active,
                   uint32_t Exec);
  Outcome execReturn(Warp &W, uint32_t Pc, uint32_t Active, uint32_t Exec);
  Outcome execBarrier(Warp &W, const Instruction &I, uint32_t Pc,
                      uint32_t Active, uint32_t Exec);
  Outcome execWarpSync(Warp &W, const Instruction &I, uint32_t Pc,
                       uint32_t Active, uint32_t Exec);
  bool performWarpOp(Warp &W, const Instruction &I, uint32_t Pc,
                     uint32_t Group);
  Outcome execCpAsync(Warp &W, const Instruction &I, uint32_t Pc,
                      uint32_t Exec);
  Outcome execCpAsyncGroup(Warp &W, const Instruction &I, uint32_t Exec);
  bool checkFullWarp(Warp &W, const Instruction &I, uint32_t Pc,
                     uint32_t Active, uint32_t Exec);
  Outcome execLdmatrix(Warp &W, const Instruction &I, uint32_t Pc,
                       uint32_t Active, uint32_t Exec);
  Outcome execMma(Warp &W, const Instruction &I, uint32_t Pc, uint32_t Active,
                  uint32_t Exec);
  /// Align: the required alignment when it differs from Size.
  uint8_t *resolve(Warp &W, unsigned L, uint32_t Pc, Space Sp, uint64_t Addr,
                   unsigned Size, const char *What, bool Write, Space &Resolved,
                   unsigned Align = 0);
  /// LaneSizes: per-lane access sizes instead of Size. Returns the
  /// access's distinct sectors and, in `Level` (with CountLoadWaits), the
  /// farthest level one of them is read from: DRAM where no load or store
  /// of the launch touched it before, the L2 where none of the block did,
  /// else the L1. A prefetch (`Demand` false) asks the L2 for lines, but a
  /// load right after it still waits for DRAM.
  unsigned countGlobal(const uint64_t *Addrs, uint32_t Mask, unsigned Size,
                       const unsigned *LaneSizes = nullptr,
                       LoadLevel *Level = nullptr, bool Demand = true);
  void countShared(const uint64_t *Offsets, uint32_t Mask, unsigned Size);
};

} // namespace

bool BlockRunner::fail(const Warp &W, unsigned Lane, uint32_t Pc,
                       const std::string &Msg) {
  if (!Err.empty())
    return false;
  uint32_t Linear = W.Index * 32 + Lane;
  uint32_t Tx = Linear % C.Block.X, Ty = (Linear / C.Block.X) % C.Block.Y,
           Tz = Linear / (C.Block.X * C.Block.Y);
  std::ostringstream OS;
  OS << "kernel '" << F.Name << "'";
  uint32_t Fi = Pc >> PcShift, Ii = Pc & PcInstMask;
  if (Fi < M.Functions.size() && Ii < M.Functions[Fi].Code.size()) {
    const Function &Fn = M.Functions[Fi];
    if (Fi != KernelIndex)
      OS << ", function '" << Fn.Name << "'";
    OS << ", line " << Fn.Code[Ii].Line << " `" << Fn.Text[Ii] << "`";
  }
  OS << ", thread ctaid=(" << Cta[0] << "," << Cta[1] << "," << Cta[2]
     << ") tid=(" << Tx << "," << Ty << "," << Tz << "): " << Msg;
  Err = OS.str();
  return false;
}

void BlockRunner::initWarp(Warp &W, unsigned Index) {
  W.Index = Index;
  W.R.assign(static_cast<size_t>(TotalRegs) * 32, 0);
  W.Frame = W.R.data() + Frames[KernelIndex].RegBase * 32;
  W.Local.assign(static_cast<size_t>(TotalLocal) * 32, 0);
  W.ThreadParams.assign(static_cast<size_t>(TotalThreadParams) * 32, 0);
  W.ExistMask = 0;
  for (AsyncCopyQueue &Q : W.Async)
    Q.reset();
  if (C.CountLoadWaits)
    W.Loads.reset(TotalRegs);
  W.Converged = true;
  W.CommonPc = KernelIndex << PcShift;
  unsigned NumWarps = static_cast<unsigned>(Warps.size());
  for (unsigned L = 0; L < 32; ++L) {
    uint32_t Linear = Index * 32 + L;
    W.Pc[L] = W.CommonPc;
    W.Depth[L] = 0;
    W.State[L] = LaneState::Exited;
    if (Linear >= Threads)
      continue;
    W.ExistMask |= 1u << L;
    W.State[L] = LaneState::Running;
    uint64_t Values[] = {Linear % C.Block.X,
                         (Linear / C.Block.X) % C.Block.Y,
                         Linear / (C.Block.X * C.Block.Y),
                         C.Block.X,
                         C.Block.Y,
                         C.Block.Z,
                         Cta[0],
                         Cta[1],
                         Cta[2],
                         C.Grid.X,
                         C.Grid.Y,
                         C.Grid.Z,
                         L,
                         Index,
                         NumWarps,
                         1u << L,
                         (1u << L) - 1,
                         (2ull << L) - 1,
                         ~((2ull << L) - 1) & 0xffffffffu,
                         ~((1ull << L) - 1) & 0xffffffffu,
                         0,
                         0};
    static_assert(sizeof(Values) / sizeof(Values[0]) ==
                  static_cast<size_t>(Special::Count));
    // Every frame has its own copy of the special registers.
    for (size_t Fi = 0; Fi < Frames.size(); ++Fi)
      if (Fi == KernelIndex || !M.Functions[Fi].IsEntry)
        for (unsigned S = 0; S < static_cast<unsigned>(Special::Count); ++S)
          W.R[(Frames[Fi].RegBase + S) * 32 + L] = Values[S];
  }
  W.RunMask = W.ExistMask;
}

Status BlockRunner::run(uint32_t X, uint32_t Y, uint32_t Z) {
  Cta[0] = X;
  Cta[1] = Y;
  Cta[2] = Z;
  std::fill(Shared.begin(), Shared.end(), 0);
  for (const Variable &V : M.Variables)
    if (V.Sp == Space::Shared && V.Offset != ~0ull && !V.Init.empty())
      std::copy(V.Init.begin(), V.Init.end(), Shared.begin() + V.Offset);
  for (Barrier &B : Bars)
    B = Barrier();
  for (unsigned I = 0; I < Warps.size(); ++I)
    initWarp(Warps[I], I);
  if (C.CountLoadWaits)
    BlockSectors.clear();
  for (;;) {
    // Round-robin over the warps until none can run.
    for (bool Ran = true; Ran;) {
      Ran = false;
      for (Warp &W : Warps) {
        if (!W.RunMask)
          continue;
        if (!runWarp(W))
          return Status::error(ErrorCode::Backend, Err);
        Ran = true;
      }
    }
    bool AllExited = true;
    for (const Warp &W : Warps)
      for (unsigned L = 0; L < 32; ++L)
        AllExited &= W.State[L] == LaneState::Exited;
    if (AllExited) {
      if (C.CountLoadWaits)
        for (const Warp &W : Warps) {
          K.LoadWaits += W.Loads.Waits;
          K.WarpLoadWaits.push_back(W.Loads.Waits);
        }
      return Status::success();
    }
    bool Released = false;
    if (!releaseBarriers(Released))
      return Status::error(ErrorCode::Backend, Err);
    if (!Released) {
      reportDeadlock();
      return Status::error(ErrorCode::Backend, Err);
    }
  }
}

bool BlockRunner::runWarp(Warp &W) {
  uint32_t LastFunc = UINT32_MAX;
  const Instruction *Code = nullptr;
  uint32_t CodeSize = 0;
  for (unsigned Steps = 0; W.RunMask && Steps < WarpQuantum; ++Steps) {
    uint32_t Pc, Active;
    if (W.Converged) {
      Pc = W.CommonPc;
      Active = W.RunMask;
    } else {
      // Deepest call first, then the smallest PC: lanes inside a call
      // return before the caller's other lanes run past the call.
      uint64_t Best = UINT64_MAX;
      FOR_LANES(L, W.RunMask)
      Best =
          std::min(Best, (uint64_t(MaxCallDepth - W.Depth[L]) << 32) | W.Pc[L]);
      Pc = static_cast<uint32_t>(Best);
      Active = 0;
      FOR_LANES(L, W.RunMask)
      Active |= (W.Pc[L] == Pc) << L;
      if (Active == W.RunMask) {
        W.Converged = true;
        W.CommonPc = Pc;
      }
    }
    if ((Pc >> PcShift) != LastFunc) {
      LastFunc = CurFunc = Pc >> PcShift;
      const Function &Fn = M.Functions[CurFunc];
      Code = Fn.Code.data();
      CodeSize = static_cast<uint32_t>(Fn.Code.size());
      W.Frame = W.R.data() + Frames[CurFunc].RegBase * 32;
    }
    if ((Pc & PcInstMask) >= CodeSize)
      return fail(W, ctz(Active), Pc,
                  "execution ran past the end of the function");
    const Instruction &I = Code[Pc & PcInstMask];
    if (++K.WarpInstructions > C.MaxWarpInstructions)
      return fail(W, ctz(Active), Pc,
                  "instruction limit of " +
                      std::to_string(C.MaxWarpInstructions) +
                      " warp instructions exceeded (infinite loop?)");
    uint32_t Exec = Active;
    if (I.Pred >= 0) {
      Exec = 0;
      const uint64_t *P = &W.Frame[I.Pred * 32];
      FOR_LANES(L, Active)
      Exec |= static_cast<uint32_t>((P[L] & 1) != I.PredNegate) << L;
    }
    K.ThreadInstructions += popcount(Exec);
    ++K.WarpInstructionsByClass[static_cast<int>(I.Class)];
    if (W.Loads.PendingRegs && Exec)
      waitForLoads(W, I);
    if (C.CountLines) {
      if (I.Line >= K.WarpInstructionsByLine.size())
        K.WarpInstructionsByLine.resize(I.Line + 1);
      ++K.WarpInstructionsByLine[I.Line];
    }
    Outcome O = Exec ? execute(W, I, Pc, Active, Exec) : Outcome::Next;
    if (O == Outcome::Error)
      return false;
    if (O == Outcome::Next) {
      if (W.Converged && Active == W.RunMask) {
        ++W.CommonPc;
      } else {
        materialize(W);
        FOR_LANES(L, Active)
        ++W.Pc[L];
      }
    }
  }
  return true;
}

void BlockRunner::layoutFrames() {
  KernelIndex = static_cast<uint32_t>(&F - M.Functions.data());
  Frames.assign(M.Functions.size(), FrameInfo());
  auto AlignUp = [](uint32_t V) { return (V + 15) / 16 * 16; };
  for (size_t I = 0; I < M.Functions.size(); ++I) {
    const Function &Fn = M.Functions[I];
    if (I != KernelIndex && Fn.IsEntry)
      continue;
    Frames[I].RegBase = TotalRegs;
    TotalRegs += static_cast<uint32_t>(Fn.Regs.size());
    Frames[I].LocalBase = AlignUp(TotalLocal);
    TotalLocal = Frames[I].LocalBase + Fn.LocalBytes;
    Frames[I].ParamBase = AlignUp(TotalThreadParams);
    TotalThreadParams = Frames[I].ParamBase + Fn.ThreadParamBytes;
  }
}

/// Copies the arguments into the callee's parameters and pushes the return
/// address, lane by lane.
Outcome BlockRunner::execCall(Warp &W, const Instruction &I, uint32_t Pc,
                              uint32_t Active, uint32_t Exec) {
  uint32_t Caller = Pc >> PcShift;
  const CallSite &Site =
      M.Functions[Caller].Calls[static_cast<size_t>(I.Ops[0].Value)];
  uint32_t Callee = static_cast<uint32_t>(Site.Callee);
  const Function &Fn = M.Functions[Callee];
  materialize(W);
  FOR_LANES(L, Active) {
    if (!((Exec >> L) & 1)) {
      W.Pc[L] = Pc + 1;
      continue;
    }
    bool Recursive = Caller == Callee;
    for (unsigned D = 0; D < W.Depth[L]; ++D)
      Recursive |= (W.ReturnPc[L][D] >> PcShift) == Callee;
    if (Recursive || W.Depth[L] == MaxCallDepth) {
      fail(W, L, Pc,
           Recursive
               ? "recursive call of '" + Fn.Name + "' is not supported"
               : "calls nest deeper than " + std::to_string(MaxCallDepth));
      return Outcome::Error;
    }
    uint8_t *Base = W.ThreadParams.data() + size_t(L) * TotalThreadParams;
    for (size_t A = 0; A < Fn.Params.size(); ++A)
      std::memcpy(Base + Frames[Callee].ParamBase + Fn.Params[A].Offset,
                  Base + Frames[Caller].ParamBase + Site.ArgOffsets[A],
                  Fn.Params[A].Size);
    W.ReturnPc[L][W.Depth[L]++] = Pc + 1;
    W.Pc[L] = Callee << PcShift;
  }
  return Outcome::Handled;
}

/// ret: leaves a device function (copying return values to the caller's
/// slots), or ends the thread in the kernel itself.
Outcome BlockRunner::execReturn(Warp &W, uint32_t Pc, uint32_t Active,
                                uint32_t Exec) {
  uint32_t CalleeIdx = Pc >> PcShift;
  const Function &Callee = M.Functions[CalleeIdx];
  materialize(W);
  FOR_LANES(L, Active) {
    if (!((Exec >> L) & 1)) {
      W.Pc[L] = Pc + 1;
      continue;
    }
    if (W.Depth[L] == 0) {
      W.State[L] = LaneState::Exited;
      W.RunMask &= ~(1u << L);
      continue;
    }
    uint32_t Ret = W.ReturnPc[L][--W.Depth[L]];
    uint32_t CallerIdx = Ret >> PcShift;
    const Function &Caller = M.Functions[CallerIdx];
    const Instruction &CallInst = Caller.Code[(Ret & PcInstMask) - 1];
    const CallSite &Site =
        Caller.Calls[static_cast<size_t>(CallInst.Ops[0].Value)];
    uint8_t *Base = W.ThreadParams.data() + size_t(L) * TotalThreadParams;
    for (size_t R = 0; R < Site.RetOffsets.size(); ++R)
      std::memcpy(Base + Frames[CallerIdx].ParamBase + Site.RetOffsets[R],
                  Base + Frames[CalleeIdx].ParamBase + Callee.Returns[R].Offset,
                  Callee.Returns[R].Size);
    W.Pc[L] = Ret;
  }
  return Outcome::Handled;
}

Outcome BlockRunner::execute(Warp &W, const Instruction &I, uint32_t Pc,
                             uint32_t Active, uint32_t Exec) {
  switch (I.Op) {
  case Opcode::Mov:
    return execMov(W, I, Pc, Exec);
  case Opcode::Cvta:
    return execCvta(W, I, Pc, Exec);
  case Opcode::Ld:
  case Opcode::St:
    return execMemory(W, I, Pc, Exec);
  case Opcode::Atom:
  case Opcode::Red:
    return execAtomic(W, I, Pc, Exec);
  case Opcode::Prefetch:
    return execPrefetch(W, I, Pc, Exec);
  case Opcode::Membar:
  case Opcode::Nanosleep:
    return Outcome::Next;
  case Opcode::Bra: {
    uint32_t Target =
        (Pc & ~PcInstMask) | static_cast<uint32_t>(I.Ops[0].Value);
    if (Exec == Active && W.Converged && Active == W.RunMask) {
      W.CommonPc = Target;
      return Outcome::Handled;
    }
    materialize(W);
    FOR_LANES(L, Active)
    W.Pc[L] = ((Exec >> L) & 1) ? Target : Pc + 1;
    return Outcome::Handled;
  }
  case Opcode::Call:
    return execCall(W, I, Pc, Active, Exec);
  case Opcode::Ret:
    return execReturn(W, Pc, Active, Exec);
  case Opcode::Exit:
    materialize(W);
    FOR_LANES(L, Active) {
      if ((Exec >> L) & 1)
        W.State[L] = LaneState::Exited;
      else
        W.Pc[L] = Pc + 1;
    }
    W.RunMask &= ~Exec;
    return Outcome::Handled;
  case Opcode::Trap:
    fail(W, ctz(Exec), Pc, "trap executed");
    return Outcome::Error;
  case Opcode::Bar:
  case Opcode::BarArrive:
  case Opcode::BarRed:
    return execBarrier(W, I, Pc, Active, Exec);
  case Opcode::Shfl:
  case Opcode::Vote:
  case Opcode::Redux:
  case Opcode::BarWarpSync:
    return execWarpSync(W, I, Pc, Active, Exec);
  case Opcode::Activemask:
    FOR_LANES(L, Exec)
    set(W, I.Ops[0].RegIdx, L, Exec);
    return Outcome::Next;
  case Opcode::CpAsync:
    return execCpAsync(W, I, Pc, Exec);
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWait:
    return execCpAsyncGroup(W, I, Exec);
  case Opcode::Ldmatrix:
    return execLdmatrix(W, I, Pc, Active, Exec);
  case Opcode::Mma:
    return execMma(W, I, Pc, Active, Exec);
  case Opcode::Unsupported:
    fail(W, ctz(Exec), Pc, funcOf(Pc).Notes[Pc & PcInstMask]);
    return Outcome::Error;
  default:
    return execAlu(W, I, Pc, Exec);
  }
}

namespace {

/// A source operand as a lane-indexed array: registers read their row of the
/// register file, immediates a single broadcast value.
class Lanes {
public:
  Lanes(const uint64_t *R, const Operand &O)
      : Imm(static_cast<uint64_t>(O.Value)),
        Base(O.K == Operand::Reg ? &R[O.RegIdx * 32] : &Imm),
        Step(O.K == Operand::Reg ? 1 : 0) {}
  uint64_t operator[](unsigned L) const { return Base[L * Step]; }

private:
  uint64_t Imm;
  const uint64_t *Base;
  unsigned Step;
};

inline float f32Of(uint64_t V) {
  float F;
  uint32_t B = static_cast<uint32_t>(V);
  std::memcpy(&F, &B, 4);
  return F;
}

/// The bits of an f32 result; NaN results are canonical as on hardware.
inline uint64_t f32Bits(float F) {
  uint32_t B;
  std::memcpy(&B, &F, 4);
  return F != F ? 0x7fffffffu : B;
}

/// Applies Fn to every lane in Exec, writing the destination register.
template <unsigned NumSrc, typename Fn>
void mapLanes(uint64_t *R, const Instruction &I, uint32_t Exec, Fn F) {
  Lanes A(R, I.Ops[1]), B(R, I.Ops[NumSrc > 1 ? 2 : 1]),
      C(R, I.Ops[NumSrc > 2 ? 3 : 1]);
  uint64_t *D = &R[I.Ops[0].RegIdx * 32];
  if (Exec == 0xffffffffu) {
    for (unsigned L = 0; L < 32; ++L)
      D[L] = F(A[L], B[L], C[L]);
    return;
  }
  FOR_LANES(L, Exec)
  D[L] = F(A[L], B[L], C[L]);
}

/// Integer comparison for the fast setp path.
template <typename T> bool cmpInt(CmpOp Op, T A, T B, bool &Ok) {
  switch (Op) {
  case CmpOp::Eq:
    return A == B;
  case CmpOp::Ne:
    return A != B;
  case CmpOp::Lt:
  case CmpOp::Lo:
    return A < B;
  case CmpOp::Le:
  case CmpOp::Ls:
    return A <= B;
  case CmpOp::Gt:
  case CmpOp::Hi:
    return A > B;
  case CmpOp::Ge:
  case CmpOp::Hs:
    return A >= B;
  default:
    Ok = false;
    return false;
  }
}

} // namespace

/// Tight loops for the instructions that dominate compiled kernels: 32- and
/// 64-bit integer arithmetic and round-to-nearest f32 arithmetic without
/// modifiers. Everything else goes through evalLane. Returns false when I
/// is not one of them.
bool BlockRunner::fastAlu(Warp &W, const Instruction &I, uint32_t Exec) {
  if (I.Ops[0].K != Operand::Reg || I.Ops[0].Elems[0] >= 0)
    return false;
  uint64_t *R = W.Frame;
  auto Bits32 = [](Type T) {
    return T == Type::B32 || T == Type::U32 || T == Type::S32;
  };
  auto Bits64 = [](Type T) {
    return T == Type::B64 || T == Type::U64 || T == Type::S64;
  };
  if (I.Op == Opcode::Selp) {
    if (I.Ops[3].Negate)
      return false;
    mapLanes<3>(R, I, Exec, [](uint64_t A, uint64_t B, uint64_t P) {
      return (P & 1) ? A : B;
    });
    return true;
  }
  auto IsInt = [](Type T) { return T >= Type::B8 && T <= Type::S64; };
  if (I.Op == Opcode::Cvt && !I.Flags && IsInt(I.Ty) && IsInt(I.Ty2) &&
      I.NumOps == 2) {
    // Integer widening/narrowing: truncate to the source, extend to the
    // destination.
    Type Src = I.Ty2, Dst = I.Ty;
    mapLanes<1>(R, I, Exec, [Src, Dst](uint64_t A, uint64_t, uint64_t) {
      return extendTo64(extendTo64(A, Src), Dst);
    });
    return true;
  }
  if (I.Flags != 0 && I.Flags != FlagRound)
    return false;
  if (I.Ty == Type::F32 && I.Rnd == RoundingMode::NearestEven) {
    switch (I.Op) {
    case Opcode::Add:
      mapLanes<2>(R, I, Exec, [](uint64_t A, uint64_t B, uint64_t) {
        return f32Bits(f32Of(A) + f32Of(B));
      });
      return true;
    case Opcode::Sub:
      mapLanes<2>(R, I, Exec, [](uint64_t A, uint64_t B, uint64_t) {
        return f32Bits(f32Of(A) - f32Of(B));
      });
      return true;
    case Opcode::Mul:
      mapLanes<2>(R, I, Exec, [](uint64_t A, uint64_t B, uint64_t) {
        return f32Bits(f32Of(A) * f32Of(B));
      });
      return true;
    case Opcode::Fma:
    case Opcode::Mad:
      mapLanes<3>(R, I, Exec, [](uint64_t A, uint64_t B, uint64_t C) {
        return f32Bits(std::fmaf(f32Of(A), f32Of(B), f32Of(C)));
      });
      return true;
    case Opcode::Min:
    case Opcode::Max: {
      // NaN operands are ignored unless both are NaN; -0 < +0.
      bool IsMax = I.Op == Opcode::Max;
      mapLanes<2>(R, I, Exec, [IsMax](uint64_t A, uint64_t B, uint64_t) {
        float X = f32Of(A), Y = f32Of(B);
        if (X != X)
          return f32Bits(Y);
        if (Y != Y)
          return f32Bits(X);
        if (X == Y)
          return (std::signbit(X) != IsMax) ? (A & 0xffffffffu)
                                            : (B & 0xffffffffu);
        return ((X > Y) == IsMax) ? (A & 0xffffffffu) : (B & 0xffffffffu);
      });
      return true;
    }
    default:
      return false;
    }
  }
  bool Is32 = Bits32(I.Ty), Is64 = Bits64(I.Ty);
  if (!Is32 && !Is64)
    return false;
  bool Sg = isSigned(I.Ty);
  auto Ext = [Is32, Sg](uint64_t V) -> uint64_t {
    return !Is32 ? V
           : Sg  ? static_cast<uint64_t>(static_cast<int32_t>(V))
                 : (V & 0xffffffffu);
  };
  switch (I.Op) {
  case Opcode::Add:
    mapLanes<2>(R, I, Exec,
                [&](uint64_t A, uint64_t B, uint64_t) { return Ext(A + B); });
    return true;
  case Opcode::Sub:
    mapLanes<2>(R, I, Exec,
                [&](uint64_t A, uint64_t B, uint64_t) { return Ext(A - B); });
    return true;
  case Opcode::And:
    mapLanes<2>(R, I, Exec,
                [&](uint64_t A, uint64_t B, uint64_t) { return Ext(A & B); });
    return true;
  case Opcode::Or:
    mapLanes<2>(R, I, Exec,
                [&](uint64_t A, uint64_t B, uint64_t) { return Ext(A | B); });
    return true;
  case Opcode::Xor:
    mapLanes<2>(R, I, Exec,
                [&](uint64_t A, uint64_t B, uint64_t) { return Ext(A ^ B); });
    return true;
  case Opcode::Mul:
  case Opcode::Mad:
    if (I.Sub == sub::Lo) {
      bool IsMad = I.Op == Opcode::Mad;
      mapLanes<3>(R, I, Exec, [&](uint64_t A, uint64_t B, uint64_t C) {
        return Ext(A * B + (IsMad ? C : 0));
      });
      return true;
    }
    if (I.Sub == sub::Wide && Is32) {
      bool IsMad = I.Op == Opcode::Mad;
      mapLanes<3>(R, I, Exec, [&](uint64_t A, uint64_t B, uint64_t C) {
        uint64_t P = Sg ? static_cast<uint64_t>(int64_t(int32_t(A)) *
                                                int64_t(int32_t(B)))
                        : (A & 0xffffffffu) * (B & 0xffffffffu);
        return P + (IsMad ? C : 0);
      });
      return true;
    }
    return false;
  case Opcode::Shl:
    mapLanes<2>(R, I, Exec, [&](uint64_t A, uint64_t B, uint64_t) {
      uint32_t N = static_cast<uint32_t>(B);
      return N >= (Is32 ? 32u : 64u) ? 0 : Ext(A << N);
    });
    return true;
  case Opcode::Shr:
    mapLanes<2>(R, I, Exec, [&](uint64_t A, uint64_t B, uint64_t) {
      uint32_t N = static_cast<uint32_t>(B);
      if (Sg)
        return Ext(static_cast<uint64_t>(static_cast<int64_t>(Ext(A)) >>
                                         std::min(N, 63u)));
      uint64_t V = Is32 ? (A & 0xffffffffu) : A;
      return N >= (Is32 ? 32u : 64u) ? 0 : V >> N;
    });
    return true;
  case Opcode::Setp: {
    if (I.Combine != BoolOp::None)
      return false;
    bool Ok = true;
    CmpOp Op = I.Cmp;
    cmpInt<uint64_t>(Op, 0, 0, Ok);
    if (!Ok)
      return false;
    mapLanes<2>(R, I, Exec, [&](uint64_t A, uint64_t B, uint64_t) -> uint64_t {
      bool Unused = true;
      if (Sg)
        return cmpInt<int64_t>(Op, int64_t(Ext(A)), int64_t(Ext(B)), Unused);
      return cmpInt<uint64_t>(Op, Ext(A), Ext(B), Unused);
    });
    return true;
  }
  default:
    return false;
  }
}

/// add/sub/mad with .cc carry-out and addc/subc/madc carry-in. For
/// subtraction the flag is a borrow, as PTX's subc defines it.
void BlockRunner::execCarry(Warp &W, const Instruction &I, uint32_t Exec) {
  unsigned Bits = typeBits(I.Ty);
  unsigned __int128 Mask = (static_cast<unsigned __int128>(1) << Bits) - 1;
  uint64_t *CF = &W.Frame[I.Ops[5].RegIdx * 32];
  bool In = I.has(FlagCarryIn), Out = I.has(FlagCC);
  FOR_LANES(L, Exec) {
    unsigned __int128 A = val(W, I.Ops[1], L) & Mask,
                      B = val(W, I.Ops[2], L) & Mask;
    unsigned __int128 Cin = In ? (CF[L] & 1) : 0, R;
    bool Carry;
    if (I.Op == Opcode::Sub) {
      R = (A - B - Cin) & Mask;
      Carry = A < B + Cin;
    } else {
      if (I.Op == Opcode::Mad) {
        unsigned __int128 P = A * B;
        A = I.Sub == sub::Hi ? (P >> Bits) & Mask : P & Mask;
        B = val(W, I.Ops[3], L) & Mask;
      }
      unsigned __int128 Sum = A + B + Cin;
      R = Sum & Mask;
      Carry = (Sum >> Bits) != 0;
    }
    set(W, I.Ops[0].RegIdx, L, extendTo64(static_cast<uint64_t>(R), I.Ty));
    if (Out)
      CF[L] = Carry;
  }
}

Outcome BlockRunner::execAlu(Warp &W, const Instruction &I, uint32_t Pc,
                             uint32_t Exec) {
  if (I.Flags & (FlagCC | FlagCarryIn)) {
    execCarry(W, I, Exec);
    return Outcome::Next;
  }
  if (fastAlu(W, I, Exec))
    return Outcome::Next;
  uint64_t S[6] = {0, 0, 0, 0, 0, 0};
  int32_t D1 = I.Ops[0].RegIdx, D2 = I.Ops[0].Elems[0];
  if (I.Ops[0].K != Operand::Reg) {
    fail(W, ctz(Exec), Pc, "destination must be a register");
    return Outcome::Error;
  }
  // Compute all lanes before writing so a destination that is also a
  // source is read unmodified.
  FOR_LANES(L, Exec) {
    for (unsigned K2 = 1; K2 < I.NumOps; ++K2)
      S[K2] = val(W, I.Ops[K2], L);
    uint64_t D = 0, Q = 0;
    if (!evalLane(I, S, D, Q, Err)) {
      std::string Msg = Err;
      Err.clear();
      fail(W, L, Pc, Msg);
      return Outcome::Error;
    }
    set(W, D1, L, D);
    if (I.Op == Opcode::Setp)
      set(W, D2, L, Q);
  }
  return Outcome::Next;
}

Outcome BlockRunner::execMov(Warp &W, const Instruction &I, uint32_t Pc,
                             uint32_t Exec) {
  const Operand &Dst = I.Ops[0], &Src = I.Ops[1];
  if (Src.K == Operand::Vec) { // Pack: element 0 is least significant.
    unsigned EB = typeBits(I.Ty) / Src.VecCount;
    uint64_t Mask = EB >= 64 ? ~0ull : (1ull << EB) - 1;
    FOR_LANES(L, Exec) {
      uint64_t V = 0;
      for (unsigned E = 0; E < Src.VecCount; ++E) {
        uint64_t X = (Src.ImmMask >> E) & 1
                         ? static_cast<uint64_t>(Src.Elems[E])
                     : Src.Elems[E] >= 0 ? W.Frame[Src.Elems[E] * 32 + L]
                                         : 0;
        V |= (X & Mask) << (E * EB);
      }
      set(W, Dst.RegIdx, L, V);
    }
    return Outcome::Next;
  }
  if (Dst.K == Operand::Vec && Dst.ImmMask) {
    fail(W, ctz(Exec), Pc, "mov into an immediate vector element");
    return Outcome::Error;
  }
  if (Dst.K == Operand::Vec) { // Unpack.
    unsigned EB = typeBits(I.Ty) / Dst.VecCount;
    uint64_t Mask = EB >= 64 ? ~0ull : (1ull << EB) - 1;
    FOR_LANES(L, Exec) {
      uint64_t V = val(W, Src, L);
      for (unsigned E = 0; E < Dst.VecCount; ++E)
        set(W, Dst.Elems[E], L, (V >> (E * EB)) & Mask);
    }
    return Outcome::Next;
  }
  if (Dst.K != Operand::Reg) {
    fail(W, ctz(Exec), Pc, "mov destination must be a register");
    return Outcome::Error;
  }
  Type T = I.Ty;
  mapLanes<1>(W.Frame, I, Exec,
              [T](uint64_t A, uint64_t, uint64_t) { return extendTo64(A, T); });
  return Outcome::Next;
}

Outcome BlockRunner::execCvta(Warp &W, const Instruction &I, uint32_t Pc,
                              uint32_t Exec) {
  uint64_t Base;
  switch (I.Sp) {
  case Space::Shared:
    Base = SharedWindow;
    break;
  case Space::Local:
    // Local symbols are frame-relative; generic local addresses are not.
    Base = LocalWindow + Frames[CurFunc].LocalBase;
    break;
  case Space::Const:
    Base = ConstWindow;
    break;
  case Space::Global:
    Base = 0;
    break;
  default:
    fail(W, ctz(Exec), Pc, "unsupported cvta state space");
    return Outcome::Error;
  }
  bool To = I.has(FlagToSpace);
  uint64_t Window = Base & ~(WindowSize - 1);
  FOR_LANES(L, Exec) {
    uint64_t A = val(W, I.Ops[1], L);
    if (To && Base && (A < Window || A - Window >= WindowSize)) {
      fail(W, L, Pc,
           "cvta.to of generic address " + hex(A) +
               ", which is outside that state space's window");
      return Outcome::Error;
    }
    set(W, I.Ops[0].RegIdx, L, To ? A - Base : A + Base);
  }
  return Outcome::Next;
}

uint8_t *BlockRunner::resolve(Warp &W, unsigned L, uint32_t Pc, Space Sp,
                              uint64_t Addr, unsigned Size, const char *What,
                              bool Write, Space &Resolved, unsigned Align) {
  auto Bad = [&](const std::string &Msg) -> uint8_t * {
    fail(W, L, Pc, Msg);
    return nullptr;
  };
  auto Desc = [&] {
    return std::string(What) + " of " + std::to_string(Size) + " bytes at ";
  };
  if (!Align)
    Align = Size;
  if (Addr % Align != 0)
    return Bad("misaligned " + Desc() + hex(Addr) + " (requires " +
               std::to_string(Align) + "-byte alignment)");
  // Local offsets are relative to the current function's frame, except
  // generic ones, which address the thread's whole local area.
  if (Sp == Space::Local)
    Addr += Frames[CurFunc].LocalBase;
  if (Sp == Space::Generic) {
    Sp = Space::Global;
    if (Addr >= SharedWindow && Addr - SharedWindow < WindowSize) {
      Sp = Space::Shared;
      Addr -= SharedWindow;
    } else if (Addr >= LocalWindow && Addr - LocalWindow < WindowSize) {
      Sp = Space::Local;
      Addr -= LocalWindow;
    } else if (Addr >= ConstWindow && Addr - ConstWindow < WindowSize) {
      Sp = Space::Const;
      Addr -= ConstWindow;
    }
  }
  Resolved = Sp;
  switch (Sp) {
  case Space::Shared:
    if (Addr > Shared.size() || Size > Shared.size() - Addr)
      return Bad("out-of-bounds shared " + Desc() + "offset " + hex(Addr) +
                 " (the block has " + std::to_string(Shared.size()) +
                 " bytes of shared memory)");
    return Shared.data() + Addr;
  case Space::Local:
    if (Addr > TotalLocal || Size > TotalLocal - Addr)
      return Bad("out-of-bounds local " + Desc() + "offset " + hex(Addr) +
                 " (" + std::to_string(TotalLocal) + " bytes per thread)");
    return W.Local.data() + static_cast<size_t>(L) * TotalLocal + Addr;
  case Space::ThreadParam: {
    uint32_t Limit = M.Functions[CurFunc].ThreadParamBytes;
    if (Addr > Limit || Size > Limit - Addr)
      return Bad("out-of-bounds param " + Desc() + "offset " + hex(Addr));
    return W.ThreadParams.data() + static_cast<size_t>(L) * TotalThreadParams +
           Frames[CurFunc].ParamBase + Addr;
  }
  case Space::Const:
    if (Write)
      return Bad(std::string(What) + " to constant memory");
    if (Addr > M.ConstData.size() || Size > M.ConstData.size() - Addr)
      return Bad("out-of-bounds const " + Desc() + "offset " + hex(Addr));
    return const_cast<uint8_t *>(M.ConstData.data()) + Addr;
  case Space::Param:
    if (Write)
      return Bad(std::string(What) + " to kernel parameter space");
    if (Addr > C.Params.size() || Size > C.Params.size() - Addr)
      return Bad("out-of-bounds param " + Desc() + "offset " + hex(Addr));
    return const_cast<uint8_t *>(C.Params.data()) + Addr;
  default:
    break;
  }
  DeviceMemory::Allocation *A = LastAlloc;
  if (!A || Addr < A->Base || Addr - A->Base > A->Size ||
      Size > A->Size - (Addr - A->Base)) {
    A = Mem.find(Addr, Size);
    if (!A) {
      DeviceMemory::Allocation *Near = Mem.find(Addr, 0);
      std::string Why = " is outside every device allocation";
      if (Near)
        Why = " overruns the allocation at " + hex(Near->Base) + " of " +
              std::to_string(Near->Size) + " bytes";
      return Bad("out-of-bounds global " + Desc() + hex(Addr) + Why);
    }
    LastAlloc = A;
  }
  return A->Data.get() + (Addr - A->Base);
}

unsigned BlockRunner::countGlobal(const uint64_t *Addrs, uint32_t Mask,
                                  unsigned Size, const unsigned *LaneSizes,
                                  LoadLevel *Level, bool Demand) {
  uint64_t Sectors[64];
  unsigned N = 0;
  uint64_t Bytes = 0;
  FOR_LANES(L, Mask) {
    unsigned Sz = LaneSizes ? LaneSizes[L] : Size;
    Bytes += Sz;
    for (uint64_t S = Addrs[L] >> 5; Sz && S <= (Addrs[L] + Sz - 1) >> 5; ++S)
      if (N < 64)
        Sectors[N++] = S;
  }
  // Lanes usually access ascending addresses: skip the sort then.
  if (!std::is_sorted(Sectors, Sectors + N))
    std::sort(Sectors, Sectors + N);
  ++K.GlobalWarpAccesses;
  K.GlobalBytesRequested += Bytes;
  unsigned Distinct = std::unique(Sectors, Sectors + N) - Sectors;
  K.GlobalSectors += Distinct;
  if (C.CountDistinctSectors)
    for (unsigned I = 0; I < Distinct; ++I)
      K.GlobalDistinctSectors += DistinctSectors.insert(Sectors[I]);
  if (C.CountLoadWaits && Demand) {
    LoadLevel Farthest = LoadLevel::L1;
    for (unsigned I = 0; I < Distinct; ++I) {
      LoadLevel Found = DemandSectors.insert(Sectors[I])  ? LoadLevel::Dram
                        : BlockSectors.insert(Sectors[I]) ? LoadLevel::L2
                                                          : LoadLevel::L1;
      if (Found == LoadLevel::Dram)
        BlockSectors.insert(Sectors[I]);
      Farthest = std::max(Farthest, Found);
    }
    if (Level)
      *Level = Farthest;
  }
  return Distinct;
}

/// Whether `I` splits a register into parts or joins parts into one
/// (`mov.b32 {%rs1, %rs2}, %r1` and back), register to register.
static bool isRegisterSplitOrJoin(const Instruction &I) {
  if (I.Op != Opcode::Mov || I.NumOps != 2)
    return false;
  Operand::Kind To = I.Ops[0].K, From = I.Ops[1].K;
  return (To == Operand::Vec && From == Operand::Reg) ||
         (To == Operand::Reg && From == Operand::Vec);
}

void BlockRunner::waitForLoads(Warp &W, const Instruction &I) {
  LoadScoreboard &S = W.Loads;
  size_t Base = static_cast<size_t>(W.Frame - W.R.data()) / 32;
  auto IsPending = [&](int32_t Reg) {
    return Reg >= 0 && S.Pending[Base + Reg];
  };
  if (isRegisterSplitOrJoin(I) && !IsPending(I.Pred)) {
    // No instruction on the GPU (ptxas addresses a register's halves in
    // place): the parts inherit the load's wait, paid at their first use.
    auto ForEachRegister = [](const Operand &Op, auto F) {
      if (Op.K == Operand::Reg)
        F(Op.RegIdx);
      else
        for (unsigned E = 0; E < Op.VecCount; ++E)
          if (!((Op.ImmMask >> E) & 1))
            F(Op.Elems[E]);
    };
    bool FromLoad = false;
    ForEachRegister(I.Ops[1], [&](int32_t Reg) { FromLoad |= IsPending(Reg); });
    if (FromLoad) {
      ForEachRegister(I.Ops[0], [&](int32_t Reg) {
        if (Reg >= 0 && !S.Pending[Base + Reg]) {
          S.Pending[Base + Reg] = 1;
          ++S.PendingRegs;
        }
      });
      return;
    }
  }
  bool Waits = IsPending(I.Pred);
  for (unsigned O = 0; O < I.NumOps && !Waits; ++O) {
    const Operand &Op = I.Ops[O];
    if (Op.K == Operand::Reg || Op.K == Operand::Mem)
      Waits = IsPending(Op.RegIdx);
    else if (Op.K == Operand::Vec)
      for (unsigned E = 0; E < Op.VecCount; ++E)
        Waits |= !((Op.ImmMask >> E) & 1) && IsPending(Op.Elems[E]);
  }
  if (!Waits)
    return;
  ++(S.Farthest == LoadLevel::Dram ? S.Waits.Dram
     : S.Farthest == LoadLevel::L2 ? S.Waits.L2
                                   : S.Waits.L1);
  K.SectorBytesAtWaits += S.BytesInFlight;
  if (C.CountLines) {
    if (I.Line >= K.LoadWaitsByLine.size())
      K.LoadWaitsByLine.resize(I.Line + 1);
    ++K.LoadWaitsByLine[I.Line];
  }
  std::fill(S.Pending.begin(), S.Pending.end(), 0);
  S.PendingRegs = 0;
  S.BytesInFlight = 0;
  S.Farthest = LoadLevel::L1;
}

void BlockRunner::issueLoad(Warp &W, const Operand &Data, unsigned N,
                            unsigned Sectors, LoadLevel Level) {
  LoadScoreboard &S = W.Loads;
  size_t Base = static_cast<size_t>(W.Frame - W.R.data()) / 32;
  for (unsigned E = 0; E < N; ++E) {
    int32_t Reg = Data.K == Operand::Vec ? Data.Elems[E] : Data.RegIdx;
    if (Reg >= 0 && !S.Pending[Base + Reg]) {
      S.Pending[Base + Reg] = 1;
      ++S.PendingRegs;
    }
  }
  S.BytesInFlight += Sectors * 32ull;
  S.Farthest = std::max(S.Farthest, Level);
}

/// Bank conflicts: accesses wider than 4 bytes are served in phases of
/// 128 bytes (16 lanes for 8-byte, 8 lanes for 16-byte accesses). In each
/// phase a bank serving N distinct 4-byte words needs N wavefronts.
void BlockRunner::countShared(const uint64_t *Offsets, uint32_t Mask,
                              unsigned Size) {
  ++K.SharedWarpAccesses;
  unsigned LanesPerPhase = Size <= 4 ? 32 : 128 / Size;
  unsigned WordsPerLane = Size <= 4 ? 1 : Size / 4;
  for (unsigned Phase = 0; Phase < 32; Phase += LanesPerPhase) {
    uint32_t PhaseMask =
        Mask &
        (LanesPerPhase == 32 ? ~0u : ((1u << LanesPerPhase) - 1) << Phase);
    if (!PhaseMask)
      continue;
    uint64_t Words[128];
    unsigned N = 0;
    FOR_LANES(L, PhaseMask)
    for (unsigned Wd = 0; Wd < WordsPerLane; ++Wd)
      Words[N++] = Offsets[L] / 4 + Wd;
    std::sort(Words, Words + N);
    N = std::unique(Words, Words + N) - Words;
    unsigned PerBank[32] = {};
    unsigned Wavefronts = 1;
    for (unsigned J = 0; J < N; ++J)
      Wavefronts = std::max(Wavefronts, ++PerBank[Words[J] % 32]);
    K.SharedBankConflicts += Wavefronts - 1;
  }
}

Outcome BlockRunner::execMemory(Warp &W, const Instruction &I, uint32_t Pc,
                                uint32_t Exec) {
  bool IsLoad = I.Op == Opcode::Ld;
  const Operand &Addr = IsLoad ? I.Ops[1] : I.Ops[0];
  const Operand &Data = IsLoad ? I.Ops[0] : I.Ops[1];
  if (Addr.K != Operand::Mem) {
    fail(W, ctz(Exec), Pc, "expected an address operand");
    return Outcome::Error;
  }
  unsigned Elem = typeBits(I.Ty) / 8, N = I.VecWidth;
  if (IsLoad && Data.K == Operand::Vec && Data.ImmMask) {
    fail(W, ctz(Exec), Pc, "load into an immediate vector element");
    return Outcome::Error;
  }
  if (Data.K == Operand::Vec && Data.VecCount != N) {
    fail(W, ctz(Exec), Pc, "vector operand does not match the .v width");
    return Outcome::Error;
  }
  unsigned Size = Elem * N;
  uint64_t Addrs[32];
  Space Resolved = Space::Global;
  uint32_t GlobalMask = 0, SharedMask = 0;
  FOR_LANES(L, Exec) {
    uint64_t A = address(W, Addr, L);
    uint8_t *P = resolve(W, L, Pc, I.Sp, A, Size, IsLoad ? "load" : "store",
                         !IsLoad, Resolved);
    if (!P)
      return Outcome::Error;
    Addrs[L] = Resolved == Space::Shared ? P - Shared.data() : A;
    GlobalMask |= (Resolved == Space::Global) << L;
    SharedMask |= (Resolved == Space::Shared) << L;
    for (unsigned E = 0; E < N; ++E) {
      int32_t Reg = Data.K == Operand::Vec ? Data.Elems[E] : Data.RegIdx;
      if (IsLoad) {
        uint64_t V = 0;
        std::memcpy(&V, P + E * Elem, Elem);
        set(W, Reg, L, extendTo64(V, I.Ty));
      } else {
        bool Imm = Data.K == Operand::Vec && ((Data.ImmMask >> E) & 1);
        uint64_t V = Data.K == Operand::Imm ? static_cast<uint64_t>(Data.Value)
                     : Imm                  ? static_cast<uint64_t>(Reg)
                     : Reg >= 0             ? W.Frame[Reg * 32 + L]
                                            : 0;
        std::memcpy(P + E * Elem, &V, Elem);
      }
    }
  }
  if (GlobalMask) {
    LoadLevel Level = LoadLevel::Dram;
    unsigned Sectors = countGlobal(Addrs, GlobalMask, Size, nullptr, &Level);
    if (IsLoad && C.CountLoadWaits)
      issueLoad(W, Data, N, Sectors, Level);
  }
  if (SharedMask)
    countShared(Addrs, SharedMask, Size);
  return Outcome::Next;
}

/// A prefetch changes no state; it is counted as the traffic it causes, the
/// 64-byte line from its address (kvq's kernels prefetch in such lines:
/// KernelTarget::prefetch), so that lines no load reads show in the
/// distinct sectors. The address must lie in an allocation (a kernel's
/// prefetch past its pages is a bug, although the GPU ignores it).
Outcome BlockRunner::execPrefetch(Warp &W, const Instruction &I, uint32_t Pc,
                                  uint32_t Exec) {
  const Operand &Addr = I.Ops[0];
  if (Addr.K != Operand::Mem) {
    fail(W, ctz(Exec), Pc, "expected an address operand");
    return Outcome::Error;
  }
  uint64_t Addrs[32];
  uint32_t GlobalMask = 0;
  FOR_LANES(L, Exec) {
    uint64_t A = address(W, Addr, L);
    Space Resolved = Space::Global;
    if (!resolve(W, L, Pc, I.Sp, A, 1, "prefetch", false, Resolved))
      return Outcome::Error;
    Addrs[L] = A;
    GlobalMask |= (Resolved == Space::Global) << L;
  }
  if (GlobalMask)
    countGlobal(Addrs, GlobalMask, 64, nullptr, nullptr, /*Demand=*/false);
  return Outcome::Next;
}

Outcome BlockRunner::execAtomic(Warp &W, const Instruction &I, uint32_t Pc,
                                uint32_t Exec) {
  bool HasDst = I.Op == Opcode::Atom;
  const Operand &Addr = I.Ops[HasDst ? 1 : 0];
  unsigned B = HasDst ? 2 : 1;
  unsigned Size = typeBits(I.Ty) / 8;
  if (Size != 4 && Size != 8) {
    fail(W, ctz(Exec), Pc, "unsupported atomic type");
    return Outcome::Error;
  }
  ++K.AtomicWarpAccesses;
  // Lanes are applied in lane order; blocks and warps run one at a time, so
  // every read-modify-write is atomic.
  FOR_LANES(L, Exec) {
    uint64_t A = address(W, Addr, L);
    Space Resolved;
    uint8_t *P = resolve(W, L, Pc, I.Sp, A, Size, "atomic", true, Resolved);
    if (!P)
      return Outcome::Error;
    uint64_t Old = 0;
    std::memcpy(&Old, P, Size);
    Old = extendTo64(Old, I.Ty);
    uint64_t V = extendTo64(val(W, I.Ops[B], L), I.Ty), New = Old;
    bool Sg = isSigned(I.Ty);
    switch (I.Sub) {
    case sub::AAdd:
      if (I.Ty == Type::F32) {
        float X, Y;
        uint32_t O32 = static_cast<uint32_t>(Old),
                 V32 = static_cast<uint32_t>(V);
        std::memcpy(&X, &O32, 4);
        std::memcpy(&Y, &V32, 4);
        // PTX: atom.add.f32 flushes subnormal inputs and results to zero.
        auto Ftz = [](float F) {
          return std::fpclassify(F) == FP_SUBNORMAL ? std::copysign(0.0f, F)
                                                    : F;
        };
        X = Ftz(Ftz(X) + Ftz(Y));
        std::memcpy(&O32, &X, 4);
        New = O32;
      } else if (I.Ty == Type::F64) {
        double X, Y;
        std::memcpy(&X, &Old, 8);
        std::memcpy(&Y, &V, 8);
        X += Y;
        std::memcpy(&New, &X, 8);
      } else {
        New = Old + V;
      }
      break;
    case sub::AMin:
    case sub::AMax: {
      if (isFloat(I.Ty)) {
        fail(W, L, Pc, "floating-point atomic min/max is not supported");
        return Outcome::Error;
      }
      bool Less =
          Sg ? static_cast<int64_t>(V) < static_cast<int64_t>(Old) : V < Old;
      New = (I.Sub == sub::AMin) == Less ? V : Old;
      break;
    }
    case sub::AExch:
      New = V;
      break;
    case sub::ACas:
      New = Old == V ? val(W, I.Ops[B + 1], L) : Old;
      break;
    case sub::AAnd:
      New = Old & V;
      break;
    case sub::AOr:
      New = Old | V;
      break;
    case sub::AXor:
      New = Old ^ V;
      break;
    case sub::AInc:
      New = Old >= V ? 0 : Old + 1;
      break;
    case sub::ADec:
      New = (Old == 0 || Old > V) ? V : Old - 1;
      break;
    }
    std::memcpy(P, &New, Size);
    if (HasDst)
      set(W, I.Ops[0].RegIdx, L, Old);
  }
  return Outcome::Next;
}

Outcome BlockRunner::execBarrier(Warp &W, const Instruction &I, uint32_t Pc,
                                 uint32_t Active, uint32_t Exec) {
  // bar.sync a{, b}; bar.arrive a, b; bar.red.op d, a{, b}, {!}c.
  unsigned IdOp = I.Op == Opcode::BarRed ? 1 : 0;
  bool HasCount = I.Op == Opcode::BarRed ? I.NumOps == 4 : I.NumOps == 2;
  unsigned L0 = ctz(Exec);
  uint64_t Id = val(W, I.Ops[IdOp], L0);
  uint64_t Count = HasCount ? val(W, I.Ops[IdOp + 1], L0) : Threads;
  if (Id >= 16) {
    fail(W, L0, Pc, "barrier id " + std::to_string(Id) + " is out of range");
    return Outcome::Error;
  }
  FOR_LANES(L, Exec)
  if (val(W, I.Ops[IdOp], L) != Id) {
    fail(W, L, Pc, "lanes of one warp use different barrier ids");
    return Outcome::Error;
  }
  Barrier &B = Bars[Id];
  if (B.Arrived == 0)
    B.Expected = static_cast<uint32_t>(Count);
  else if (B.Expected != Count) {
    fail(W, L0, Pc,
         "barrier " + std::to_string(Id) + " expects " +
             std::to_string(B.Expected) + " threads, this arrival " +
             std::to_string(Count));
    return Outcome::Error;
  }
  B.Arrived += popcount(Exec);
  if (I.Op == Opcode::BarRed) {
    const Operand &P = I.Ops[I.NumOps - 1];
    FOR_LANES(L, Exec)
    B.Popc += (val(W, P, L) & 1) != P.Negate;
  }
  if (I.Op == Opcode::BarArrive)
    return Outcome::Next;
  materialize(W);
  FOR_LANES(L, Active) {
    if ((Exec >> L) & 1) {
      W.State[L] = LaneState::AtBarrier;
      W.BarrierId[L] = static_cast<uint8_t>(Id);
      W.Pc[L] = Pc;
    } else {
      W.Pc[L] = Pc + 1;
    }
  }
  W.RunMask &= ~Exec;
  return Outcome::Handled;
}

bool BlockRunner::releaseBarriers(bool &Released) {
  for (unsigned Id = 0; Id < 16; ++Id) {
    Barrier &B = Bars[Id];
    if (B.Arrived == 0 || B.Arrived < B.Expected)
      continue;
    Released = true;
    ++K.Barriers;
    uint32_t Total = B.Arrived;
    for (Warp &W : Warps) {
      W.Converged = false;
      for (unsigned L = 0; L < 32; ++L) {
        if (W.State[L] != LaneState::AtBarrier || W.BarrierId[L] != Id)
          continue;
        const Instruction &I = funcOf(W.Pc[L]).Code[W.Pc[L] & PcInstMask];
        if (I.Op == Opcode::BarRed) {
          uint64_t R = I.Sub == sub::BPopc  ? B.Popc
                       : I.Sub == sub::BAnd ? B.Popc == Total
                                            : B.Popc != 0;
          frameOf(W, W.Pc[L])[I.Ops[0].RegIdx * 32 + L] = R;
        }
        W.State[L] = LaneState::Running;
        ++W.Pc[L];
        W.RunMask |= 1u << L;
      }
    }
    B = Barrier();
  }
  return true;
}

bool BlockRunner::reportDeadlock() {
  uint32_t Exited = 0;
  for (const Warp &W : Warps)
    for (unsigned L = 0; L < 32; ++L)
      Exited += ((W.ExistMask >> L) & 1) && W.State[L] == LaneState::Exited;
  for (const Warp &W : Warps)
    for (unsigned L = 0; L < 32; ++L) {
      if (W.State[L] == LaneState::AtWarpSync)
        return fail(W, L, W.Pc[L],
                    "warp-synchronous deadlock: membermask " +
                        hex(W.WaitMask[L]) +
                        " names lanes that never arrive at this instruction "
                        "(inconsistent masks or divergent lanes)");
    }
  for (const Warp &W : Warps)
    for (unsigned L = 0; L < 32; ++L) {
      if (W.State[L] != LaneState::AtBarrier)
        continue;
      const Barrier &B = Bars[W.BarrierId[L]];
      return fail(W, L, W.Pc[L],
                  "barrier deadlock: barrier " +
                      std::to_string(W.BarrierId[L]) + " expects " +
                      std::to_string(B.Expected) + " threads but only " +
                      std::to_string(B.Arrived) + " arrived (" +
                      std::to_string(Exited) +
                      " threads exited, the others wait elsewhere)");
    }
  Err = "kernel '" + F.Name + "': deadlock with no waiting thread";
  return false;
}

Outcome BlockRunner::execWarpSync(Warp &W, const Instruction &I, uint32_t Pc,
                                  uint32_t Active, uint32_t Exec) {
  unsigned MaskOp = I.Op == Opcode::Shfl          ? 4
                    : I.Op == Opcode::BarWarpSync ? 0
                                                  : 2;
  materialize(W);
  FOR_LANES(L, Active & ~Exec)
  W.Pc[L] = Pc + 1;
  uint32_t Pending = Exec;
  while (Pending) {
    unsigned L0 = ctz(Pending);
    uint32_t Mask = static_cast<uint32_t>(val(W, I.Ops[MaskOp], L0));
    uint32_t Group = 0;
    FOR_LANES(L, Pending) {
      uint32_t LM = static_cast<uint32_t>(val(W, I.Ops[MaskOp], L));
      if (LM == Mask)
        Group |= 1u << L;
      else if ((Mask >> L) & 1) {
        fail(W, L, Pc,
             "inconsistent membermask: lane " + std::to_string(L) + " uses " +
                 hex(LM) + " but lane " + std::to_string(L0) + " uses " +
                 hex(Mask));
        return Outcome::Error;
      }
    }
    FOR_LANES(L, Group)
    if (!((Mask >> L) & 1)) {
      fail(W, L, Pc,
           "executing lane " + std::to_string(L) + " is not in membermask " +
               hex(Mask));
      return Outcome::Error;
    }
    if (Mask & ~W.ExistMask) {
      fail(W, L0, Pc,
           "membermask " + hex(Mask) +
               " names lanes that are not threads of the block");
      return Outcome::Error;
    }
    bool Ready = true;
    FOR_LANES(J, Mask & ~Group) {
      if (W.State[J] == LaneState::Exited) {
        fail(W, L0, Pc,
             "membermask " + hex(Mask) + " names lane " + std::to_string(J) +
                 ", which has exited");
        return Outcome::Error;
      }
      bool Waiting = W.State[J] == LaneState::AtWarpSync && W.Pc[J] == Pc;
      if (Waiting && W.WaitMask[J] != Mask) {
        fail(W, L0, Pc,
             "inconsistent membermask: lane " + std::to_string(J) + " uses " +
                 hex(W.WaitMask[J]) + " but lane " + std::to_string(L0) +
                 " uses " + hex(Mask));
        return Outcome::Error;
      }
      Ready &= Waiting;
    }
    if (Ready) {
      if (!performWarpOp(W, I, Pc, Mask))
        return Outcome::Error;
      FOR_LANES(J, Mask) {
        W.State[J] = LaneState::Running;
        W.Pc[J] = Pc + 1;
      }
      W.RunMask |= Mask;
    } else {
      FOR_LANES(L, Group) {
        W.State[L] = LaneState::AtWarpSync;
        W.WaitMask[L] = Mask;
        W.Pc[L] = Pc;
      }
      W.RunMask &= ~Group;
    }
    Pending &= ~Group;
  }
  return Outcome::Handled;
}

bool BlockRunner::performWarpOp(Warp &W, const Instruction &I, uint32_t Pc,
                                uint32_t Group) {
  uint64_t Result[32];
  switch (I.Op) {
  case Opcode::Shfl: {
    bool Valid[32];
    FOR_LANES(L, Group) {
      uint32_t B = static_cast<uint32_t>(val(W, I.Ops[2], L)) & 31;
      uint32_t Cv = static_cast<uint32_t>(val(W, I.Ops[3], L));
      uint32_t Clamp = Cv & 31, Seg = (Cv >> 8) & 31;
      uint32_t MaxLane = (L & Seg) | (Clamp & ~Seg), MinLane = L & Seg;
      int J;
      bool P;
      switch (I.Sub) {
      case sub::Up:
        J = int(L) - int(B);
        P = J >= int(MaxLane);
        break;
      case sub::Down:
        J = int(L + B);
        P = J <= int(MaxLane);
        break;
      case sub::Bfly:
        J = int(L ^ B);
        P = J <= int(MaxLane);
        break;
      default:
        J = int(MinLane | (B & ~Seg));
        P = J <= int(MaxLane);
        break;
      }
      if (!P)
        J = int(L);
      if (!((Group >> J) & 1))
        return fail(W, L, Pc,
                    "shfl source lane " + std::to_string(J) +
                        " is not in membermask " + hex(Group));
      Result[L] = val(W, I.Ops[1], static_cast<unsigned>(J)) & 0xffffffffull;
      Valid[L] = P;
    }
    FOR_LANES(L, Group) {
      set(W, I.Ops[0].RegIdx, L, Result[L]);
      set(W, I.Ops[0].Elems[0], L, Valid[L]);
    }
    return true;
  }
  case Opcode::Vote: {
    uint32_t Ballot = 0;
    const Operand &P = I.Ops[1];
    FOR_LANES(L, Group)
    Ballot |= static_cast<uint32_t>((val(W, P, L) & 1) != P.Negate) << L;
    uint64_t R = I.Sub == sub::All   ? Ballot == Group
                 : I.Sub == sub::Any ? Ballot != 0
                 : I.Sub == sub::Uni ? (Ballot == 0 || Ballot == Group)
                                     : Ballot;
    FOR_LANES(L, Group)
    set(W, I.Ops[0].RegIdx, L, R);
    return true;
  }
  case Opcode::Redux: {
    bool Sg = isSigned(I.Ty);
    uint64_t Acc = 0;
    bool First = true;
    FOR_LANES(L, Group) {
      uint64_t V = extendTo64(val(W, I.Ops[1], L), I.Ty);
      if (First) {
        Acc = V;
        First = false;
        continue;
      }
      switch (I.Sub) {
      case sub::RAdd:
        Acc += V;
        break;
      case sub::RMin:
        Acc = Sg ? (int64_t(V) < int64_t(Acc) ? V : Acc) : std::min(Acc, V);
        break;
      case sub::RMax:
        Acc = Sg ? (int64_t(V) > int64_t(Acc) ? V : Acc) : std::max(Acc, V);
        break;
      case sub::RAnd:
        Acc &= V;
        break;
      case sub::ROr:
        Acc |= V;
        break;
      default:
        Acc ^= V;
        break;
      }
    }
    FOR_LANES(L, Group)
    set(W, I.Ops[0].RegIdx, L, extendTo64(Acc, I.Ty));
    return true;
  }
  default:
    return true; // bar.warp.sync: the rendezvous is the whole effect.
  }
}

//===----------------------------------------------------------------------===//
// cp.async, ldmatrix, mma
//===----------------------------------------------------------------------===//

/// cp.async: both addresses are checked now and the copy is queued; it is
/// performed at the issuing thread's wait (AsyncCopy.h). The global read and
/// the shared write are counted here, like ld and st.
Outcome BlockRunner::execCpAsync(Warp &W, const Instruction &I, uint32_t Pc,
                                 uint32_t Exec) {
  const Operand &Dst = I.Ops[0], &Src = I.Ops[1];
  unsigned CopySize = static_cast<unsigned>(I.Ops[2].Value);
  uint64_t DstOffsets[32], SrcAddrs[32];
  unsigned SrcSizes[32];
  uint32_t ReadMask = 0;
  FOR_LANES(L, Exec) {
    uint64_t SrcSize = CopySize;
    if (I.Sub == sub::SrcSize)
      SrcSize = val(W, I.Ops[3], L) & 0xffffffffu;
    else if (I.Sub == sub::SrcIgnore)
      SrcSize = (val(W, I.Ops[3], L) & 1) != I.Ops[3].Negate ? 0 : CopySize;
    if (SrcSize > CopySize) {
      fail(W, L, Pc,
           "cp.async src-size " + std::to_string(SrcSize) +
               " exceeds cp-size " + std::to_string(CopySize));
      return Outcome::Error;
    }
    uint64_t DA = address(W, Dst, L);
    uint64_t SA = address(W, Src, L);
    Space Resolved;
    uint8_t *DP = resolve(W, L, Pc, Space::Shared, DA, CopySize,
                          "cp.async shared write", true, Resolved);
    if (!DP)
      return Outcome::Error;
    const uint8_t *SP = nullptr;
    if (SrcSize) {
      SP = resolve(W, L, Pc, Space::Global, SA, static_cast<unsigned>(SrcSize),
                   "cp.async global read", false, Resolved, CopySize);
      if (!SP)
        return Outcome::Error;
      ReadMask |= 1u << L;
    }
    W.Async[L].issue(DP, SP, CopySize, static_cast<unsigned>(SrcSize));
    DstOffsets[L] = static_cast<uint64_t>(DP - Shared.data());
    SrcAddrs[L] = SA;
    SrcSizes[L] = static_cast<unsigned>(SrcSize);
  }
  if (ReadMask)
    countGlobal(SrcAddrs, ReadMask, 0, SrcSizes);
  countShared(DstOffsets, Exec, CopySize);
  return Outcome::Next;
}

/// cp.async.commit_group, cp.async.wait_group N and cp.async.wait_all
/// (commit, then wait for every group), per thread.
Outcome BlockRunner::execCpAsyncGroup(Warp &W, const Instruction &I,
                                      uint32_t Exec) {
  FOR_LANES(L, Exec) {
    AsyncCopyQueue &Q = W.Async[L];
    if (I.Op == Opcode::CpAsyncCommit || I.Sub)
      Q.commit();
    if (I.Op == Opcode::CpAsyncWait)
      Q.wait(I.Sub ? 0 : val(W, I.Ops[0], L));
  }
  return Outcome::Next;
}

/// ldmatrix and mma are .sync.aligned: the whole warp executes them
/// together, converged, with the same guard.
bool BlockRunner::checkFullWarp(Warp &W, const Instruction &I, uint32_t Pc,
                                uint32_t Active, uint32_t Exec) {
  if (Active == 0xffffffffu && Exec == Active)
    return true;
  bool Exited = false;
  for (unsigned L = 0; L < 32; ++L)
    Exited |= ((W.ExistMask >> L) & 1) && W.State[L] == LaneState::Exited;
  std::string Why = Exec != Active       ? "the guard predicate differs"
                    : W.ExistMask != ~0u ? "the warp is not full"
                    : Exited             ? "lanes of the warp have exited"
                                         : "the warp's lanes diverged";
  return fail(W, ctz(Exec), Pc,
              std::string(I.Op == Opcode::Mma ? "mma" : "ldmatrix") +
                  ".sync.aligned executed by lanes " + hex(Exec) +
                  " of the warp (" + Why +
                  "): warp-collective instructions need all 32 lanes");
}

/// ldmatrix.m8n8.x{1,2,4}{.trans}.b16: lanes 8j..8j+7 give the row
/// addresses of matrix j.
Outcome BlockRunner::execLdmatrix(Warp &W, const Instruction &I, uint32_t Pc,
                                  uint32_t Active, uint32_t Exec) {
  if (!checkFullWarp(W, I, Pc, Active, Exec))
    return Outcome::Error;
  unsigned Num = I.VecWidth;
  uint32_t RowLanes = Num == 4 ? ~0u : (1u << (8 * Num)) - 1;
  const Operand &Addr = I.Ops[1], &Dst = I.Ops[0];
  const uint8_t *Rows[32] = {};
  uint64_t Offsets[32];
  FOR_LANES(L, RowLanes) {
    uint64_t A = address(W, Addr, L);
    Space Resolved;
    uint8_t *P =
        resolve(W, L, Pc, I.Sp, A, 16, "ldmatrix row read", false, Resolved);
    if (!P)
      return Outcome::Error;
    if (Resolved != Space::Shared) {
      fail(W, L, Pc, "ldmatrix row address " + hex(A) + " is not shared");
      return Outcome::Error;
    }
    Rows[L] = P;
    Offsets[L] = static_cast<uint64_t>(P - Shared.data());
  }
  Fragment D;
  ldmatrixWarp(Num, I.Sub != 0, Rows, D);
  for (unsigned J = 0; J < Num; ++J) {
    int32_t Reg = Dst.K == Operand::Vec ? Dst.Elems[J] : Dst.RegIdx;
    for (unsigned L = 0; L < 32; ++L)
      set(W, Reg, L, D[L][J]);
  }
  // Eight 16-byte rows per matrix: one 128-byte phase each.
  countShared(Offsets, RowLanes, 16);
  return Outcome::Next;
}

Outcome BlockRunner::execMma(Warp &W, const Instruction &I, uint32_t Pc,
                             uint32_t Active, uint32_t Exec) {
  if (!checkFullWarp(W, I, Pc, Active, Exec))
    return Outcome::Error;
  MmaShape S;
  S.K = I.Sub;
  S.Acc = I.Ty;
  S.A = I.Ty2;
  S.B = I.Ty3;
  S.Saturate = I.has(FlagSat);
  // Operands: {d...}, {a...}, {b...}, {c...}; all read before D is written.
  Fragment Frags[4] = {};
  for (unsigned K = 1; K < 4; ++K) {
    const Operand &O = I.Ops[K];
    for (unsigned E = 0; E < O.VecCount; ++E) {
      bool Imm = (O.ImmMask >> E) & 1;
      for (unsigned L = 0; L < 32; ++L)
        Frags[K][L][E] = static_cast<uint32_t>(
            Imm               ? static_cast<uint64_t>(O.Elems[E])
            : O.Elems[E] >= 0 ? W.Frame[O.Elems[E] * 32 + L]
                              : 0);
    }
  }
  mmaWarp(S, Frags[1], Frags[2], Frags[3], Frags[0]);
  for (unsigned E = 0; E < MmaShape::AccRegs; ++E)
    for (unsigned L = 0; L < 32; ++L)
      set(W, I.Ops[0].Elems[E], L, extendTo64(Frags[0][L][E], I.Ty));
  return Outcome::Next;
}

Status kvq::ptx::launchKernel(const Module &M, const Function &Kernel,
                              DeviceMemory &Mem, const LaunchConfig &Config,
                              Counters &Stats) {
  auto Start = std::chrono::steady_clock::now();
  const Dim3 &G = Config.Grid, &B = Config.Block;
  if (!Kernel.IsEntry)
    return Status::error(ErrorCode::Backend,
                         "'" + Kernel.Name + "' is not a kernel (.entry)");
  if (!G.X || !G.Y || !G.Z || !B.X || !B.Y || !B.Z)
    return Status::error(ErrorCode::Backend,
                         "kernel '" + Kernel.Name + "': empty grid or block");
  if (uint64_t(B.X) * B.Y * B.Z > 1024)
    return Status::error(ErrorCode::Backend,
                         "kernel '" + Kernel.Name +
                             "': more than 1024 threads per block");
  if (Config.Params.size() < Kernel.ParamBytes)
    return Status::error(ErrorCode::Backend,
                         "kernel '" + Kernel.Name + "': expects " +
                             std::to_string(Kernel.ParamBytes) +
                             " bytes of parameters, got " +
                             std::to_string(Config.Params.size()));
  Stats = Counters();
  BlockRunner Runner(M, Kernel, Mem, Config, Stats);
  Status S = Status::success();
  for (uint32_t Z = 0; Z < G.Z && S.ok(); ++Z)
    for (uint32_t Y = 0; Y < G.Y && S.ok(); ++Y)
      for (uint32_t X = 0; X < G.X && S.ok(); ++X)
        S = Runner.run(X, Y, Z);
  Stats.Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  return S;
}
