//===- GpuModel.h - kvq-bench's GPU model over the PTX interpreter -*- C++
//-*-===//
//
// `kvq-bench --gpu-model`: runs one decode-attention call of a cache on the
// PTX interpreter and turns its counters into a model of an H100 (issue
// time against byte time). A model, not a measurement: it says whether a
// kernel is issue-bound or byte-bound, and by how much.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_TOOLS_KVQ_BENCH_GPUMODEL_H
#define KVQ_TOOLS_KVQ_BENCH_GPUMODEL_H

#include "kvq/PTXInterp/InterpDriver.h"
#include "kvq/Runtime/Runtime.h"

#include <string>
#include <vector>

namespace kvq::bench {

/// The machine of the model: an H100 SXM.
struct GpuMachine {
  unsigned SMs = ptx::ModeledDevice().Multiprocessors;
  /// Warp instructions each SM issues per clock (one per scheduler).
  unsigned IssuePerClock = 4;
  double ClockHz = 1.98e9;
  double BytesPerSecond = 3.35e12;
};

/// One kernel launch of the modeled call.
struct LaunchModel {
  std::string Kernel;
  runtime::Dim3 Grid, Block;
  ptx::Counters Counters;
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
