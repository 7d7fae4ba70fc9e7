//===- Interpreter.h - Executing PTX kernels on the CPU --------*- C++ -*-===//
//
// Runs a kernel of a decoded Module over a grid, with SIMT semantics at warp
// granularity, against a DeviceMemory of host-backed allocations at fake
// 64-bit device addresses. Every violation (unsupported instruction, bad
// access, deadlock, inconsistent warp-synchronous masks) ends the launch
// with an error naming kernel, PTX line, instruction and thread.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_INTERPRETER_H
#define KVQ_PTXINTERP_INTERPRETER_H

#include "kvq/PTXInterp/Module.h"

#include <map>
#include <memory>
#include <vector>

namespace kvq::ptx {

/// Grid or block extents of a launch.
struct Dim3 {
  unsigned X = 1, Y = 1, Z = 1;
};

/// Device memory: allocations at increasing fake addresses starting at
/// GlobalBase, separated by unmapped gaps, never reused, so out-of-bounds
/// and use-after-free accesses hit no allocation and are reported.
class DeviceMemory {
public:
  struct Allocation {
    uint64_t Base = 0;
    uint64_t Size = 0;
    std::unique_ptr<uint8_t[]> Data;
  };

  /// Allocates Bytes (zero-filled) aligned to 256 bytes.
  uint64_t allocate(uint64_t Bytes);
  Status free(uint64_t Address);
  /// The allocation containing [Address, Address + Bytes), or null.
  Allocation *find(uint64_t Address, uint64_t Bytes);
  Status write(uint64_t Address, const void *Src, uint64_t Bytes);
  Status read(void *Dst, uint64_t Address, uint64_t Bytes);
  Status fill(uint64_t Address, uint8_t Value, uint64_t Bytes);

private:
  std::map<uint64_t, Allocation> Allocations;
  uint64_t Next = GlobalBase;
};

/// Per-launch statistics. "Warp-level access": one memory instruction
/// executed by one warp (its active lanes together).
/// Where a global load's data comes from, nearest first.
enum class LoadLevel : uint8_t { L1, L2, Dram };

/// Waits for global loads, by the farthest level they waited for.
struct LoadWaitCounts {
  uint64_t Dram = 0, L2 = 0, L1 = 0;
  uint64_t total() const { return Dram + L2 + L1; }
  LoadWaitCounts &operator+=(const LoadWaitCounts &O) {
    Dram += O.Dram;
    L2 += O.L2;
    L1 += O.L1;
    return *this;
  }
};

struct Counters {
  uint64_t WarpInstructions = 0;
  uint64_t ThreadInstructions = 0;
  uint64_t WarpInstructionsByClass[static_cast<int>(InstClass::Count)] = {};
  /// Global (and generic-to-global) loads and stores, atomics excluded.
  uint64_t GlobalWarpAccesses = 0;
  uint64_t GlobalBytesRequested = 0;
  /// Distinct 32-byte sectors touched, summed over warp-level accesses.
  uint64_t GlobalSectors = 0;
  /// Distinct sectors over the whole launch: the DRAM traffic if L2 keeps
  /// every sector read again. Counted only with
  /// LaunchConfig::CountDistinctSectors (it costs a bitmap lookup per
  /// sector), 0 otherwise.
  uint64_t GlobalDistinctSectors = 0;
  uint64_t SharedWarpAccesses = 0;
  /// Shared-memory wavefronts beyond the minimum each access needs (32
  /// banks of 4 bytes; lanes reading the same word do not conflict).
  uint64_t SharedBankConflicts = 0;
  uint64_t AtomicWarpAccesses = 0;
  uint64_t Barriers = 0;
  /// Where warps wait for their global loads, counted only with
  /// LaunchConfig::CountLoadWaits: a warp waits at an instruction naming a
  /// register a global load has yet to write, and every load it issued
  /// before then is taken to arrive there. A wait is for the farthest
  /// level one of those loads reads from: DRAM where it touches a sector
  /// no load or store of the launch touched before, the L2 where none of
  /// its block did, else the L1. LoadWaits sums the waits of every warp;
  /// WarpLoadWaits holds each warp's, block by block; SectorBytesAtWaits
  /// sums the 32-byte sectors in flight at each wait (a warp's bytes in
  /// flight, for Little's law).
  LoadWaitCounts LoadWaits;
  std::vector<LoadWaitCounts> WarpLoadWaits;
  uint64_t SectorBytesAtWaits = 0;
  /// Warp instructions by line of the module's PTX text (index: line, from
  /// 1), counted only with LaunchConfig::CountLines: where a kernel's
  /// instructions go, block by block (`kvq-bench --gpu-model --profile`).
  std::vector<uint64_t> WarpInstructionsByLine;
  /// Load waits by the line of the instruction that waited (with
  /// CountLines and CountLoadWaits).
  std::vector<uint64_t> LoadWaitsByLine;
  double Seconds = 0;

  /// Requested bytes / (sectors * 32); 1.0 for perfectly coalesced access.
  double coalescingEfficiency() const {
    return GlobalSectors ? double(GlobalBytesRequested) / (GlobalSectors * 32.0)
                         : 1.0;
  }
  double warpInstructionsPerSecond() const {
    return Seconds > 0 ? WarpInstructions / Seconds : 0;
  }
  /// Multi-line human-readable summary.
  std::string format() const;
};

struct LaunchConfig {
  Dim3 Grid;
  Dim3 Block;
  unsigned DynamicSharedBytes = 0;
  /// The kernel's parameter buffer, laid out as Function::Params says.
  std::vector<uint8_t> Params;
  /// A bound against kernels that never terminate (about five minutes).
  uint64_t MaxWarpInstructions = 1ull << 31;
  /// Fill Counters::GlobalDistinctSectors.
  bool CountDistinctSectors = false;
  /// Fill Counters::WarpInstructionsByLine.
  bool CountLines = false;
  /// Fill Counters::LoadWaits and the counters beside it.
  bool CountLoadWaits = false;
};

/// Packs cuLaunchKernel-style argument pointers into a parameter buffer.
std::vector<uint8_t> packParams(const Function &Kernel, void *const *Args);

/// Runs Kernel (an .entry of M) to completion. Blocks run one after another;
/// within a block, warps take turns, each running until it blocks on a
/// barrier, finishes, or has run a quantum of instructions.
Status launchKernel(const Module &M, const Function &Kernel, DeviceMemory &Mem,
                    const LaunchConfig &Config, Counters &Stats);

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_INTERPRETER_H
