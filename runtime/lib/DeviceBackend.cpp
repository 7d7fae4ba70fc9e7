//===- DeviceBackend.cpp - A backend over a DeviceDriver ------------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// Runs the artifact's PTX through any DeviceDriver: the CUDA driver on a GPU,
// or the PTX interpreter in tests. The module is loaded and every kernel of
// the manifest resolved when the backend is created, so a missing or broken
// kernel fails there rather than in the middle of an append.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Backend.h"

#include <unordered_map>

using namespace kvq::runtime;

namespace {

class DeviceBackend : public Backend {
public:
  DeviceBackend(std::unique_ptr<DeviceDriver> Driver,
                std::unordered_map<std::string, KernelHandle> Kernels)
      : Driver(std::move(Driver)), Kernels(std::move(Kernels)) {}

  std::string name() const override { return "device: " + Driver->name(); }

  Expected<DevicePtr> allocate(size_t Bytes) override {
    // Zero-byte buffers still get a distinct, valid address.
    return Driver->allocate(Bytes ? Bytes : 16);
  }
  Status free(DevicePtr Ptr) override { return Driver->free(Ptr); }
  Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) override {
    if (!Bytes)
      return Status::success();
    Counters.BytesToDevice += Bytes;
    return Driver->copyToDevice(Dst, Src, Bytes);
  }
  Status copyToHost(void *Dst, DevicePtr Src, size_t Bytes) override {
    if (!Bytes)
      return Status::success();
    Counters.BytesToHost += Bytes;
    return Driver->copyToHost(Dst, Src, Bytes);
  }
  Status copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) override {
    if (!Bytes)
      return Status::success();
    Counters.BytesWithinDevice += Bytes;
    return Driver->copyWithin(Dst, Src, Bytes);
  }
  Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) override {
    if (!Bytes)
      return Status::success();
    Counters.BytesSet += Bytes;
    return Driver->memset(Dst, Value, Bytes);
  }
  void setStream(StreamHandle Stream) override { Driver->setStream(Stream); }

  Status launch(const std::string &Name, Dim3 Grid, Dim3 Block,
                unsigned SharedBytes, void **Args) override {
    Expected<KernelHandle> Kernel = kernel(Name);
    if (!Kernel.ok())
      return Kernel.status();
    ++Counters.Launches;
    Status S = Driver->launch(*Kernel, Grid, Block, SharedBytes, Args);
    if (S.ok() || S.message().find("'" + Name + "'") != std::string::npos)
      return S;
    return S.withContext("kernel '" + Name + "': ");
  }

  Status synchronize() override {
    ++Counters.Synchronizations;
    return Driver->synchronize();
  }

  Expected<unsigned> residentBlocks(const std::string &Name, Dim3 Block,
                                    unsigned SharedBytes) override {
    Expected<KernelHandle> Kernel = kernel(Name);
    if (!Kernel.ok())
      return Kernel.status();
    return Driver->residentBlocks(*Kernel, Block, SharedBytes);
  }

private:
  Expected<KernelHandle> kernel(const std::string &Name) const {
    auto It = Kernels.find(Name);
    if (It == Kernels.end())
      return Status::error(ErrorCode::Backend,
                           "device backend: unknown kernel '" + Name + "'");
    return It->second;
  }

  std::unique_ptr<DeviceDriver> Driver;
  std::unordered_map<std::string, KernelHandle> Kernels;
};

} // namespace

/// The SM version of a target name ("sm_90" -> 90, "sm_90a" -> 90); 0 when
/// the name is no SM target.
static unsigned smOf(const std::string &Target) {
  if (Target.rfind("sm_", 0) != 0 || Target.size() < 5)
    return 0;
  unsigned Sm = 0;
  for (size_t I = 3; I < Target.size() && Target[I] >= '0' && Target[I] <= '9';
       ++I)
    Sm = 10 * Sm + unsigned(Target[I] - '0');
  return Sm;
}

Expected<std::string> kvq::runtime::choosePtxTarget(const Artifact &A,
                                                    unsigned DeviceSm,
                                                    const std::string &Target) {
  std::vector<std::string> Targets = A.ptxTargets();
  auto List = [&] {
    std::string L;
    for (const std::string &T : Targets)
      L += (L.empty() ? "" : ", ") + T;
    return L;
  };
  if (!Target.empty()) {
    if (DeviceSm && smOf(Target) > DeviceSm)
      return Status::error(ErrorCode::Unsupported,
                           "PTX target " + Target +
                               " is newer than the device (sm_" +
                               std::to_string(DeviceSm) + ")");
    return Target;
  }
  // The newest target the device loads: the newer PTX may use what the
  // device has. Without a device SM (the interpreter), the oldest.
  std::string Best;
  for (const std::string &T : Targets) {
    unsigned Sm = smOf(T);
    if (Sm == 0 || (DeviceSm && Sm > DeviceSm))
      continue;
    if (Best.empty() || (DeviceSm ? Sm > smOf(Best) : Sm < smOf(Best)))
      Best = T;
  }
  if (Best.empty())
    return Status::error(ErrorCode::Unsupported,
                         "artifact '" + A.directory() + "' has PTX for " +
                             (Targets.empty() ? "no target" : List()) +
                             ", none of which the device (sm_" +
                             std::to_string(DeviceSm) + ") loads");
  return Best;
}

Expected<std::unique_ptr<Backend>>
kvq::runtime::createDeviceBackend(const Artifact &A,
                                  std::unique_ptr<DeviceDriver> Driver,
                                  const std::string &Target) {
  if (!Driver)
    return Status::error(ErrorCode::Backend, "device backend: no driver");
  Expected<std::string> Chosen =
      choosePtxTarget(A, Driver->smVersion(), Target);
  if (!Chosen.ok())
    return Chosen.status();
  Expected<std::string> PTX = A.loadPTX(*Chosen);
  if (!PTX.ok())
    return PTX.status();
  Expected<ModuleHandle> Module = Driver->loadModule(*PTX);
  if (!Module.ok())
    return Module.status().withContext("device backend: loading the " +
                                       *Chosen + " PTX of '" + A.directory() +
                                       "' failed: ");
  std::unordered_map<std::string, KernelHandle> Kernels;
  for (const KernelInfo &K : A.manifest().Kernels) {
    Expected<KernelHandle> H = Driver->getKernel(*Module, K.Name);
    if (!H.ok())
      return H.status().withContext("device backend: kernel '" + K.Name +
                                    "': ");
    Kernels[K.Name] = *H;
  }
  return std::unique_ptr<Backend>(
      new DeviceBackend(std::move(Driver), std::move(Kernels)));
}

Expected<std::unique_ptr<Backend>>
kvq::runtime::createCudaBackend(const Artifact &A, int DeviceOrdinal,
                                const std::string &Target) {
  Expected<std::unique_ptr<DeviceDriver>> Driver =
      createCudaDriver(DeviceOrdinal);
  if (!Driver.ok())
    return Driver.status();
  return createDeviceBackend(A, std::move(*Driver), Target);
}
