//===- GpuModel.cpp - kvq-bench's GPU model over the PTX interpreter ------===//
//
// The model: a kernel's time on an H200 is the largest of three bounds,
// plus the launch's fixed cost:
// - issue: warp instructions / (SMs x schedulers x clock);
// - bytes: DRAM bytes / bandwidth, DRAM bytes being the distinct 32-byte
//   global sectors of the launch (the interpreter's GlobalDistinctSectors:
//   every sector read once from DRAM, re-reads served by L2);
// - latency: a warp that uses a load's data waits for it (the interpreter's
//   LoadWaits: each use of a register a global load has yet to write, all
//   loads issued before it arriving there; splitting such a register into
//   halves, no instruction on the GPU, passes the wait on to the halves'
//   first use), each wait a DRAM latency where
//   a load in flight reads a sector first in the launch, else an L2
//   latency (the merge reads the partial rows other blocks wrote). The
//   warps resident at once (by the registers and shared memory ptxas gives
//   each kernel) wait side by side: latency time = latency x the most
//   waits of one warp, or of the waits / resident warps where the grid
//   runs in waves. This is Little's law: the bandwidth latency allows is
//   the bytes the resident warps have in flight (the B/wait column, per
//   warp) over the latency.
// Caches beyond the L2's re-reads, and contention between the bounds, are
// not modeled.
//
//===----------------------------------------------------------------------===//

#include "GpuModel.h"

#include "kvq/PTXInterp/InterpDriver.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>
#include <unistd.h>

using namespace kvq;
using namespace kvq::bench;
using namespace kvq::runtime;

namespace {

/// The interpreter's driver, keeping every launch's counters, grid and
/// kernel name.
class RecordingDriver : public ptx::InterpDriver {
public:
  explicit RecordingDriver(bool CountLines) {
    setCountDistinctSectors(true);
    setCountLines(CountLines);
    setCountLoadWaits(true);
  }
  Expected<ModuleHandle> loadModule(const std::string &Text) override {
    Ptx = Text;
    return InterpDriver::loadModule(Text);
  }
  Expected<KernelHandle> getKernel(ModuleHandle Module,
                                   const std::string &Name) override {
    Expected<KernelHandle> Handle = InterpDriver::getKernel(Module, Name);
    if (Handle.ok())
      Names[Handle->Id] = Name;
    return Handle;
  }
  Status launch(KernelHandle Kernel, Dim3 Grid, Dim3 Block,
                unsigned DynamicSharedBytes, void **Args) override {
    Status Result =
        InterpDriver::launch(Kernel, Grid, Block, DynamicSharedBytes, Args);
    if (Recording)
      Launches.push_back({Names[Kernel.Id], Grid, Block, lastCounters()});
    return Result;
  }

  bool Recording = false;
  std::vector<LaunchModel> Launches;
  /// The module's text, whose lines WarpInstructionsByLine counts.
  std::string Ptx;

private:
  std::map<uint64_t, std::string> Names;
};

double threads(const Dim3 &D) { return double(D.X) * D.Y * D.Z; }

/// The warps of one block of `L`.
unsigned warpsPerBlock(const LaunchModel &L) {
  return unsigned((threads(L.Block) + 31) / 32);
}

/// ptxas, from the build's configuration or the PATH; empty if neither.
std::string findPtxas() {
#ifdef KVQ_PTXAS
  if (access(KVQ_PTXAS, X_OK) == 0)
    return KVQ_PTXAS;
#endif
  for (const char *Dir : {"/usr/local/cuda/bin", "/usr/bin"}) {
    std::string Path = std::string(Dir) + "/ptxas";
    if (access(Path.c_str(), X_OK) == 0)
      return Path;
  }
  return "";
}

/// Each kernel's registers and shared memory for `Chip`, from `ptxas -v`
/// on `Ptx`; empty where ptxas is not found or fails.
std::map<std::string, KernelResources> readResources(const std::string &Ptx,
                                                     const char *Chip) {
  std::map<std::string, KernelResources> Kernels;
  std::string Ptxas = findPtxas();
  if (Ptxas.empty())
    return Kernels;
  char Path[] = "/tmp/kvq-bench-XXXXXX";
  int Fd = mkstemp(Path);
  if (Fd < 0)
    return Kernels;
  close(Fd);
  std::ofstream(Path) << Ptx;
  std::string Command =
      Ptxas + " -v -arch=" + Chip + " -o /dev/null " + Path + " 2>&1";
  std::string Report;
  if (FILE *Pipe = popen(Command.c_str(), "r")) {
    char Buffer[4096];
    while (size_t N = std::fread(Buffer, 1, sizeof(Buffer), Pipe))
      Report.append(Buffer, N);
    pclose(Pipe);
  }
  std::remove(Path);
  // "Compiling entry function 'NAME' for 'sm_90'" ... "Used R registers,
  // ... S bytes smem".
  std::istringstream Lines(Report);
  std::string Line, Kernel;
  while (std::getline(Lines, Line)) {
    size_t At = Line.find("Compiling entry function '");
    if (At != std::string::npos) {
      size_t Begin = At + 26;
      Kernel = Line.substr(Begin, Line.find('\'', Begin) - Begin);
      continue;
    }
    At = Line.find("Used ");
    if (At == std::string::npos || Kernel.empty())
      continue;
    KernelResources &R = Kernels[Kernel];
    R.Known = true;
    R.Registers = unsigned(std::strtoul(Line.c_str() + At + 5, nullptr, 10));
    size_t Smem = Line.find(" bytes smem");
    if (Smem != std::string::npos) {
      size_t Begin = Line.rfind(' ', Smem - 1) + 1;
      R.SharedBytes = unsigned(std::strtoul(Line.c_str() + Begin, nullptr, 10));
    }
  }
  return Kernels;
}

/// Blocks of `L` resident on one SM at once: by warps, blocks, registers
/// and shared memory; 0 where its resources are unknown.
unsigned blocksPerSM(const LaunchModel &L, const GpuMachine &M) {
  if (!L.Resources.Known)
    return 0;
  unsigned Warps = warpsPerBlock(L);
  unsigned PerWarp = (L.Resources.Registers * 32 + M.RegisterUnit - 1) /
                     M.RegisterUnit * M.RegisterUnit;
  unsigned Blocks = std::min(M.BlocksPerSM, M.WarpsPerSM / Warps);
  if (PerWarp)
    Blocks = std::min(Blocks, M.RegistersPerSM / (PerWarp * Warps));
  unsigned Shared = L.Resources.SharedBytes + M.SharedBytesPerBlockReserved;
  return std::min(Blocks, M.SharedBytesPerSM / Shared);
}

/// One launch's bounds, in seconds; `Latency` is 0 where its resident
/// blocks are unknown.
struct LaunchTimes {
  double Issue = 0, Bytes = 0, Latency = 0;
  unsigned BlocksPerSM = 0;
  double model(const GpuMachine &M) const {
    return std::max({Issue, Bytes, Latency}) + M.LaunchSeconds;
  }
};

LaunchTimes timeLaunch(const LaunchModel &L, const GpuMachine &M) {
  const ptx::Counters &C = L.Counters;
  LaunchTimes T;
  T.Issue = C.WarpInstructions / (double(M.SMs) * M.IssuePerClock * M.ClockHz);
  T.Bytes = C.GlobalDistinctSectors * 32.0 / M.BytesPerSecond;
  T.BlocksPerSM = blocksPerSM(L, M);
  if (T.BlocksPerSM) {
    double Warps = threads(L.Grid) * warpsPerBlock(L);
    double Resident =
        std::min(Warps, double(M.SMs) * T.BlocksPerSM * warpsPerBlock(L));
    auto Wait = [&](const ptx::LoadWaitCounts &W) {
      return M.DramLatencySeconds * W.Dram + M.L2LatencySeconds * W.L2 +
             M.L1LatencySeconds * W.L1;
    };
    double Longest = 0;
    for (const ptx::LoadWaitCounts &W : C.WarpLoadWaits)
      Longest = std::max(Longest, Wait(W));
    T.Latency = std::max(Longest, Wait(C.LoadWaits) / Resident);
  }
  return T;
}

/// "Memory 31%, Integer 28%, ...": the three largest instruction classes.
std::string instructionMix(const ptx::Counters &C) {
  std::vector<std::pair<uint64_t, int>> Classes;
  for (int I = 0; I < int(ptx::InstClass::Count); ++I)
    Classes.push_back({C.WarpInstructionsByClass[I], I});
  std::sort(Classes.rbegin(), Classes.rend());
  std::string Mix;
  for (unsigned I = 0; I < 3 && C.WarpInstructions; ++I) {
    char Cell[48];
    std::snprintf(Cell, sizeof(Cell), "%s%s %.0f%%", I ? ", " : "",
                  ptx::className(ptx::InstClass(Classes[I].second)),
                  100.0 * Classes[I].first / C.WarpInstructions);
    Mix += Cell;
  }
  return Mix;
}

void printRow(const std::string &Label, const std::string &Kernel,
              const ptx::Counters &C, const LaunchTimes &T, double Model,
              double Warps, const GpuModelResult &R, const GpuMachine &M) {
  char Blocks[16] = "?";
  if (T.BlocksPerSM)
    std::snprintf(Blocks, sizeof(Blocks), "%u", T.BlocksPerSM);
  double Waits = double(C.LoadWaits.total());
  std::printf("%-22s %-10s %10.3g %8.2f %8.3f %8.1f %6s %8.1f %8.0f %8.2f "
              "%8.2f %8.2f %8.2f  %s\n",
              Label.c_str(), Kernel.c_str(), double(C.WarpInstructions),
              C.ThreadInstructions / R.Elements,
              C.GlobalDistinctSectors * 32.0 / R.MinimumBytes,
              Warps / (double(M.SMs) * M.IssuePerClock), Blocks,
              Warps ? Waits / Warps : 0,
              Waits ? C.SectorBytesAtWaits / Waits : 0, T.Issue * 1e6,
              T.Bytes * 1e6, T.Latency * 1e6, Model * 1e6,
              instructionMix(C).c_str());
}

/// The `Count` basic blocks of `C`'s kernel with the most warp
/// instructions: a block starts at a label or an entry of the PTX text.
void printHottestBlocks(const ptx::Counters &C, const std::string &Ptx,
                        unsigned Count) {
  std::vector<std::string> Lines(1);
  for (size_t Begin = 0; Begin <= Ptx.size();) {
    size_t End = std::min(Ptx.find('\n', Begin), Ptx.size());
    Lines.push_back(Ptx.substr(Begin, End - Begin));
    Begin = End + 1;
  }
  struct Block {
    size_t Line = 0;
    uint64_t Instructions = 0, Visits = 0, Waits = 0;
  };
  std::map<size_t, Block> Blocks;
  size_t Start = 0;
  for (size_t Line = 1; Line < Lines.size(); ++Line) {
    const std::string &Text = Lines[Line];
    if (Text.rfind("$L__", 0) == 0 || Text.find(".entry ") != std::string::npos)
      Start = Line;
    uint64_t N = Line < C.WarpInstructionsByLine.size()
                     ? C.WarpInstructionsByLine[Line]
                     : 0;
    if (!N)
      continue;
    Block &B = Blocks[Start];
    B.Line = Start;
    B.Instructions += N;
    B.Visits = std::max(B.Visits, N);
    if (Line < C.LoadWaitsByLine.size())
      B.Waits += C.LoadWaitsByLine[Line];
  }
  std::vector<Block> Sorted;
  for (auto &[Line, B] : Blocks)
    Sorted.push_back(B);
  std::sort(Sorted.begin(), Sorted.end(), [](const Block &X, const Block &Y) {
    return X.Instructions > Y.Instructions;
  });
  for (unsigned I = 0; I < Count && I < Sorted.size(); ++I) {
    const Block &B = Sorted[I];
    std::string Head = Lines[B.Line].substr(0, 48);
    Head.erase(0, Head.find_first_not_of(" \t"));
    std::printf("%-22s %-10s %5.1f%% of warp instructions: PTX line %zu "
                "(%s), %.0f per visit, %.1f%% of load waits\n",
                "", "", 100.0 * B.Instructions / C.WarpInstructions, B.Line,
                Head.c_str(), double(B.Instructions) / double(B.Visits),
                C.LoadWaits.total() ? 100.0 * B.Waits / C.LoadWaits.total()
                                    : 0.0);
  }
}

} // namespace

Expected<GpuModelResult>
kvq::bench::modelAttend(std::shared_ptr<const Artifact> A, Cache &Source,
                        const std::vector<SequenceId> &Seqs,
                        const std::vector<uint8_t> &Queries,
                        double MinimumBytes, double Elements,
                        unsigned SplitTokens, bool CountLines) {
  Expected<std::vector<uint8_t>> State = Source.serialize(Seqs);
  if (!State.ok())
    return State.status();
  auto Owned = std::make_unique<RecordingDriver>(CountLines);
  RecordingDriver *Driver = Owned.get();
  Expected<std::unique_ptr<Backend>> B =
      createDeviceBackend(*A, std::move(Owned), "sm_80");
  if (!B.ok())
    return B.status();
  Expected<std::unique_ptr<Cache>> Device =
      Cache::create(A, Source.options(), std::move(*B));
  if (!Device.ok())
    return Device.status();
  Expected<std::vector<SequenceId>> Ids =
      (*Device)->deserialize(State->data(), State->size());
  if (!Ids.ok())
    return Ids.status();
  const ModelShape &Model = A->manifest().Model;
  std::vector<float> Out(Seqs.size() * Model.Heads * Model.HeadDim);
  Expected<AttendPlan> Plan = (*Device)->planAttend(*Ids, 0, SplitTokens);
  if (!Plan.ok())
    return Plan.status();
  Driver->Recording = true;
  Status Called = (*Device)->attend(0, *Plan, Queries.data(), Out.data());
  if (!Called.ok())
    return Called;
  GpuModelResult Result;
  Result.SplitTokens = Plan->Splits.Tokens;
  Result.Launches = std::move(Driver->Launches);
  Result.Ptx = std::move(Driver->Ptx);
  std::map<std::string, KernelResources> Resources =
      readResources(Result.Ptx, GpuMachine().Chip);
  for (LaunchModel &L : Result.Launches)
    L.Resources = Resources[L.Kernel];
  // "kivi_2bit_attend_0" -> "attend_0".
  std::string Prefix = A->manifest().Name + "_";
  for (LaunchModel &L : Result.Launches)
    if (L.Kernel.rfind(Prefix, 0) == 0)
      L.Kernel = L.Kernel.substr(Prefix.size());
  Result.MinimumBytes = MinimumBytes;
  Result.Elements = Elements;
  return Result;
}

void kvq::bench::printGpuModelHeader(const GpuMachine &M) {
  std::printf(
      "GPU model (not a measurement): one attention call of layer 0 run on "
      "the PTX interpreter (sm_80 PTX), as an H200 would run it: issue = warp "
      "instructions / (%u SMs x %u x %.2f GHz); bytes = distinct 32-byte "
      "global sectors / %.2f TB/s; latency = %.2f us a DRAM wait, %.2f us "
      "an L2 wait of a warp for its loads (the most of one warp, or all / "
      "the warps resident at once by %s registers and shared memory); "
      "model = the largest + %.1f "
      "us a launch. inst/el = thread instructions per cached element; "
      "sect/min = sector bytes / bytes the call must read; warps/sch = "
      "launched warps per scheduler; blk/SM = resident blocks an SM (? "
      "without ptxas); waits/w = load waits per warp; B/wait = sector bytes "
      "a warp has in flight at a wait.\n",
      M.SMs, M.IssuePerClock, M.ClockHz / 1e9, M.BytesPerSecond / 1e12,
      M.DramLatencySeconds * 1e6, M.L2LatencySeconds * 1e6, M.Chip,
      M.LaunchSeconds * 1e6);
  std::printf("%-22s %-10s %10s %8s %8s %8s %6s %8s %8s %8s %8s %8s %8s  %s\n",
              "spec b/ctx", "kernel", "warp inst", "inst/el", "sect/min",
              "warps/sch", "blk/SM", "waits/w", "B/wait", "issue us",
              "bytes us", "lat us", "model us", "instruction mix");
}

void kvq::bench::printGpuModel(const std::string &Label,
                               const GpuModelResult &R, unsigned ProfileBlocks,
                               const GpuMachine &M) {
  ptx::Counters Total;
  LaunchTimes Sum;
  double TotalModel = 0, MostWarps = 0;
  for (const LaunchModel &L : R.Launches) {
    double Warps = threads(L.Grid) * warpsPerBlock(L);
    MostWarps = std::max(MostWarps, Warps);
    LaunchTimes T = timeLaunch(L, M);
    printRow(Label, L.Kernel, L.Counters, T, T.model(M), Warps, R, M);
    if (ProfileBlocks)
      printHottestBlocks(L.Counters, R.Ptx, ProfileBlocks);
    const ptx::Counters &C = L.Counters;
    Total.WarpInstructions += C.WarpInstructions;
    Total.ThreadInstructions += C.ThreadInstructions;
    Total.GlobalDistinctSectors += C.GlobalDistinctSectors;
    Total.LoadWaits += C.LoadWaits;
    Total.SectorBytesAtWaits += C.SectorBytesAtWaits;
    for (int I = 0; I < int(ptx::InstClass::Count); ++I)
      Total.WarpInstructionsByClass[I] += C.WarpInstructionsByClass[I];
    Sum.Issue += T.Issue;
    Sum.Bytes += T.Bytes;
    Sum.Latency += T.Latency;
    // The call's: the fewest of its launches' (0, unknown, stays).
    Sum.BlocksPerSM = &L == &R.Launches.front()
                          ? T.BlocksPerSM
                          : std::min(Sum.BlocksPerSM, T.BlocksPerSM);
    TotalModel += T.model(M);
  }
  printRow(Label, "call", Total, Sum, TotalModel, MostWarps, R, M);
  std::printf("%-22s %-10s model of the call (launches in sequence): %.2f us\n",
              "", "", TotalModel * 1e6);
}
