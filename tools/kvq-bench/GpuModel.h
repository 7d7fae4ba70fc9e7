//===- GpuModel.h - kvq-bench's GPU model over the PTX interpreter -*- C++
//-*-===//
//
// `kvq-bench --gpu-model`: runs one decode-attention call of a cache on the
// PTX interpreter and turns its counters into a model of an H200: issue
// time, byte time and latency time (the waits of each warp for its loads,
// over the warps resident at once). A model, not a measurement: it says
// which of the three bounds a kernel, and by how much.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TOOLS_KVQ_BENCH_GPUMODEL_H
#define KVQ_TOOLS_KVQ_BENCH_GPUMODEL_H

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include <string>
#include <vector>

namespace kvq::bench {

/// The machine of the model: the H200 of docs/Performance.md ("Machines"),
/// running sm_90 code.
struct GpuMachine {
  unsigned SMs = ptx::ModeledDevice().Multiprocessors;
  /// Warp instructions each SM issues per clock (one per scheduler).
  unsigned IssuePerClock = 4;
  double ClockHz = 1.98e9;
  /// Its measured copy bandwidth, the yardstick of the measured tables.
  double BytesPerSecond = 4.2e12;
  /// From a global load's issue to its data, under load: from HBM3e (an
  /// L2 miss, about 1000 clocks; docs/Performance.md, "GPU model", says
  /// how it was chosen), from the L2 (about 260) and from the SM's L1
  /// (about 40).
  double DramLatencySeconds = 0.5e-6;
  double L2LatencySeconds = 0.13e-6;
  double L1LatencySeconds = 0.02e-6;
  /// A launch's fixed cost, cold: from the host's issue to its last
  /// block's end, for a kernel that does nothing.
  double LaunchSeconds = 3e-6;
  /// Per SM: resident warps and blocks, registers (a warp's allocated in
  /// units of 256) and shared memory (1 KiB of it reserved per block).
  unsigned WarpsPerSM = 64, BlocksPerSM = 32, RegistersPerSM = 65536;
  unsigned RegisterUnit = 256;
  unsigned SharedBytesPerSM = 233472, SharedBytesPerBlockReserved = 1024;
  /// The chip whose registers ptxas counts.
  const char *Chip = "sm_90";
};

/// What a kernel holds on an SM while it runs, as ptxas reports it for
/// GpuMachine::Chip; unknown where ptxas is not found.
struct KernelResources {
  bool Known = false;
  unsigned Registers = 0;
  unsigned SharedBytes = 0;
};

/// One kernel launch of the modeled call.
struct LaunchModel {
  std::string Kernel;
  runtime::Dim3 Grid, Block;
  ptx::Counters Counters;
  KernelResources Resources;
};

/// One attention call, every launch of it.
struct GpuModelResult {
  std::vector<LaunchModel> Launches;
  /// Bytes the call must read (pages in use, windows, sinks, norms).
  double MinimumBytes = 0;
  /// Cached elements attended: tokens x kv-heads x head_dim x 2, summed
  /// over the batch.
  double Elements = 0;
  /// The split size the call ran with.
  unsigned SplitTokens = 0;
  /// The PTX the launches ran (their counters' lines).
  std::string Ptx;
};

/// Copies `Seqs` of `Source` (a CPU cache of the same artifact) into a cache
/// on the PTX interpreter and runs one attention call of layer 0 there, in
/// splits of `SplitTokens` (0: as the runtime plans them for the modeled
/// device, ptx::ModeledDevice), counting instructions per PTX line if
/// `CountLines`.
runtime::Expected<GpuModelResult>
modelAttend(std::shared_ptr<const runtime::Artifact> Artifact,
            runtime::Cache &Source,
            const std::vector<runtime::SequenceId> &Seqs,
            const std::vector<uint8_t> &Queries, double MinimumBytes,
            double Elements, unsigned SplitTokens = 0, bool CountLines = false);

/// One table row per launch and one for the call, for `Label`; under each
/// launch, its `ProfileBlocks` hottest basic blocks (counted lines).
void printGpuModel(const std::string &Label, const GpuModelResult &Result,
                   unsigned ProfileBlocks = 0, const GpuMachine &Machine = {});
/// The table's header and the model's definition.
void printGpuModelHeader(const GpuMachine &Machine = {});

} // namespace kvq::bench

#endif // KVQ_TOOLS_KVQ_BENCH_GPUMODEL_H
