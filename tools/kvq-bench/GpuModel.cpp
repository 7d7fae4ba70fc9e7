//===- GpuModel.cpp - kvq-bench's GPU model over the PTX interpreter ------===//
//
// The model: a kernel's time on an H100 is at least its issue
// time, warp instructions / (SMs x schedulers x clock), and at least its
// byte time, DRAM bytes / bandwidth; DRAM bytes are the distinct 32-byte
// global sectors of the launch (the interpreter's GlobalDistinctSectors:
// every sector read once from DRAM, re-reads served by L2). A kernel whose
// issue time exceeds its byte time cannot run at the memory limit whatever the
// hardware overlaps. Latency, occupancy and caches are not modeled; the warps
// per scheduler column says whether a grid can hide latency at all.
//
//===----------------------------------------------------------------------===//

#include "GpuModel.h"

#include "kvq/PTXInterp/InterpDriver.h"

#include <algorithm>
#include <cstdio>
#include <map>

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

double issueSeconds(const ptx::Counters &C, const GpuMachine &M) {
  return C.WarpInstructions / (double(M.SMs) * M.IssuePerClock * M.ClockHz);
}

double byteSeconds(const ptx::Counters &C, const GpuMachine &M) {
  return C.GlobalDistinctSectors * 32.0 / M.BytesPerSecond;
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
              const ptx::Counters &C, double Warps, const GpuModelResult &R,
              const GpuMachine &M) {
  double Issue = issueSeconds(C, M) * 1e6, Bytes = byteSeconds(C, M) * 1e6;
  std::printf("%-22s %-10s %10.3g %8.2f %8.3f %8.1f %8.2f %8.2f %8.2f  %s\n",
              Label.c_str(), Kernel.c_str(), double(C.WarpInstructions),
              C.ThreadInstructions / R.Elements,
              C.GlobalDistinctSectors * 32.0 / R.MinimumBytes,
              Warps / (double(M.SMs) * M.IssuePerClock), Issue, Bytes,
              std::max(Issue, Bytes), instructionMix(C).c_str());
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
    uint64_t Instructions = 0, Visits = 0;
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
                "(%s), %.0f per visit\n",
                "", "", 100.0 * B.Instructions / C.WarpInstructions, B.Line,
                Head.c_str(), double(B.Instructions) / double(B.Visits));
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
      "the PTX interpreter (sm_80 PTX); issue = warp instructions / (%u SMs x "
      "%u x %.2f GHz), bytes = distinct 32-byte global sectors of the launch / "
      "%.2f TB/s, "
      "model = the larger. inst/el = thread instructions per cached element; "
      "sect/min = sector bytes / bytes the call must read; warps/sch = "
      "launched warps per scheduler.\n",
      M.SMs, M.IssuePerClock, M.ClockHz / 1e9, M.BytesPerSecond / 1e12);
  std::printf("%-22s %-10s %10s %8s %8s %8s %8s %8s %8s  %s\n", "spec b/ctx",
              "kernel", "warp inst", "inst/el", "sect/min", "warps/sch",
              "issue us", "bytes us", "model us", "instruction mix");
}

void kvq::bench::printGpuModel(const std::string &Label,
                               const GpuModelResult &R, unsigned ProfileBlocks,
                               const GpuMachine &M) {
  ptx::Counters Total;
  double TotalModel = 0, MostWarps = 0;
  for (const LaunchModel &L : R.Launches) {
    double Warps = threads(L.Grid) * ((threads(L.Block) + 31) / 32);
    MostWarps = std::max(MostWarps, Warps);
    printRow(Label, L.Kernel, L.Counters, Warps, R, M);
    if (ProfileBlocks)
      printHottestBlocks(L.Counters, R.Ptx, ProfileBlocks);
    Total.WarpInstructions += L.Counters.WarpInstructions;
    Total.ThreadInstructions += L.Counters.ThreadInstructions;
    Total.GlobalDistinctSectors += L.Counters.GlobalDistinctSectors;
    for (int I = 0; I < int(ptx::InstClass::Count); ++I)
      Total.WarpInstructionsByClass[I] += L.Counters.WarpInstructionsByClass[I];
    TotalModel +=
        std::max(issueSeconds(L.Counters, M), byteSeconds(L.Counters, M));
  }
  printRow(Label, "call", Total, MostWarps, R, M);
  std::printf("%-22s %-10s model of the call (launches in sequence): %.2f us\n",
              "", "", TotalModel * 1e6);
}
