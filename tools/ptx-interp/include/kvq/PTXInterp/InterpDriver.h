//===- InterpDriver.h - DeviceDriver backed by the interpreter -*- C++ -*-===//
//
// Implements the runtime's DeviceDriver on top of the PTX interpreter, so
// runtime code that launches kernels through cuLaunchKernel-style calls can
// run unchanged in tests without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_INTERPDRIVER_H
#define KVQ_PTXINTERP_INTERPDRIVER_H

#include "kvq/PTXInterp/Interpreter.h"
#include "kvq/Runtime/DeviceDriver.h"

namespace kvq::ptx {

/// The GPU the interpreter stands for where the runtime asks how many
/// blocks fit at once (residentBlocks): an H100 SXM. The interpreter does
/// not know a kernel's registers (ptxas chooses them), so it assumes
/// RegistersPerThread, at least what kvq's kernels use (`ptxas -v`: 90 to
/// 125 on sm_80 and sm_90).
struct ModeledDevice {
  unsigned Multiprocessors = 132;
  unsigned ThreadsPerMultiprocessor = 2048;
  unsigned BlocksPerMultiprocessor = 32;
  unsigned RegistersPerMultiprocessor = 65536;
  unsigned RegistersPerThread = 128;
};

class InterpDriver : public runtime::DeviceDriver {
public:
  std::string name() const override { return "ptx-interpreter"; }
  Expected<runtime::ModuleHandle> loadModule(const std::string &PTX) override;
  Expected<runtime::KernelHandle> getKernel(runtime::ModuleHandle Module,
                                            const std::string &Name) override;
  Expected<runtime::DevicePtr> allocate(size_t Bytes) override;
  Status free(runtime::DevicePtr Ptr) override;
  Status copyToDevice(runtime::DevicePtr Dst, const void *Src,
                      size_t Bytes) override;
  Status copyToHost(void *Dst, runtime::DevicePtr Src, size_t Bytes) override;
  Status copyWithin(runtime::DevicePtr Dst, runtime::DevicePtr Src,
                    size_t Bytes) override;
  Status memset(runtime::DevicePtr Dst, uint8_t Value, size_t Bytes) override;
  Status launch(runtime::KernelHandle Kernel, runtime::Dim3 Grid,
                runtime::Dim3 Block, unsigned DynamicSharedBytes,
                void **Args) override;
  Status synchronize() override { return Status::success(); }
  /// The blocks of Block threads the modeled device holds at once.
  Expected<unsigned> residentBlocks(runtime::KernelHandle Kernel,
                                    runtime::Dim3 Block,
                                    unsigned DynamicSharedBytes) override;
  void setModeledDevice(const ModeledDevice &D) { Device = D; }
  const ModeledDevice &modeledDevice() const { return Device; }

  /// Counters of the most recent launch (successful or not).
  const Counters &lastCounters() const { return Last; }
  /// Upper bound on warp instructions per launch (default 2^31).
  void setInstructionLimit(uint64_t Limit) { InstructionLimit = Limit; }
  /// Count distinct global sectors per launch (Counters).
  void setCountDistinctSectors(bool On) { CountDistinctSectors = On; }
  /// Count warp instructions per PTX line (Counters::WarpInstructionsByLine).
  void setCountLines(bool On) { CountLines = On; }
  /// Counts where warps wait for their global loads (Counters::LoadWaits).
  void setCountLoadWaits(bool On) { CountLoadWaits = On; }
  /// The decoded module behind a handle (for inspection in tests).
  const Module *module(runtime::ModuleHandle Handle) const;

private:
  struct KernelRef {
    size_t Module;
    const Function *Fn;
  };
  /// The kernel a handle names, or an error for an invalid handle.
  Expected<const KernelRef *> kernel(runtime::KernelHandle Kernel) const;
  DeviceMemory Memory;
  std::vector<std::unique_ptr<Module>> Modules;
  std::vector<KernelRef> Kernels;
  Counters Last;
  ModeledDevice Device;
  uint64_t InstructionLimit = 1ull << 31;
  bool CountDistinctSectors = false;
  bool CountLines = false;
  bool CountLoadWaits = false;
};

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_INTERPDRIVER_H
