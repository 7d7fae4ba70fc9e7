//===- Backend.h - Where a cache's buffers and kernels live -----*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// A Backend owns memory and runs an artifact's kernels by name, with the
// cuLaunchKernel argument convention of docs/KernelABI.md. Two exist:
//  - the CPU backend: host memory, the artifact's kernels.so (or host code
//    linked into the program), one call per block on a small thread pool;
//  - the device backend: any DeviceDriver (the CUDA driver, or the PTX
//    interpreter in tests) running the artifact's PTX.
// Backends are not thread-safe; a Cache serialises its calls.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_BACKEND_H
#define KVQ_RUNTIME_BACKEND_H

#include "kvq/Runtime/Artifact.h"
#include "kvq/Runtime/DeviceDriver.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kvq::runtime {

/// What a backend has moved and run since it was created; the per-step
/// traffic bounds of docs/KernelABI.md ("Host-device traffic") are stated in
/// these. On the CPU backend host memory is the device memory.
struct TrafficCounters {
  /// Bytes copied host to device, and device to host.
  uint64_t BytesToDevice = 0;
  uint64_t BytesToHost = 0;
  /// Bytes copied within device memory (no host involved).
  uint64_t BytesWithinDevice = 0;
  /// Bytes set by memset (on the device).
  uint64_t BytesSet = 0;
  uint64_t Launches = 0;
  /// Explicit waits for the device (synchronize()).
  uint64_t Synchronizations = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// The traffic so far (every backend counts its own calls).
  const TrafficCounters &counters() const { return Counters; }
  /// Whether kernels can read host memory where it is (the CPU backend,
  /// whose device memory is host memory and whose calls finish before they
  /// return): host inputs then need no staging copy.
  virtual bool readsHostMemory() const { return false; }
  /// Whether its kernels are the artifact's host code (kernels.so) rather
  /// than its PTX: they take the manifest's host split capacity.
  virtual bool runsHostCode() const { return false; }

  /// Calls Body(I) for every I in [0, N), in any order, on the threads that
  /// run host-side work (the CPU backend's pool; elsewhere the caller's
  /// thread), and returns when all calls have returned: appends scan their
  /// host inputs with it.
  virtual void forEachOnHost(uint64_t N,
                             const std::function<void(uint64_t)> &Body) {
    for (uint64_t I = 0; I < N; ++I)
      Body(I);
  }

  /// "cpu (N threads)", or "device: <driver name>".
  virtual std::string name() const = 0;

  virtual Expected<DevicePtr> allocate(size_t Bytes) = 0;
  virtual Status free(DevicePtr Ptr) = 0;
  virtual Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) = 0;
  virtual Status copyToHost(void *Dst, DevicePtr Src, size_t Bytes) = 0;
  /// Copies between two non-overlapping ranges of device memory.
  virtual Status copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) = 0;
  virtual Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) = 0;
  /// Issues later work on Stream (DeviceDriver::setStream); the CPU backend
  /// ignores it (it finishes every call before returning).
  virtual void setStream(StreamHandle Stream) = 0;

  /// Runs the artifact kernel Name over Grid. Args is cuLaunchKernel's
  /// kernelParams: one pointer per parameter, pointing at its value.
  virtual Status launch(const std::string &Name, Dim3 Grid, Dim3 Block,
                        unsigned SharedBytes, void **Args) = 0;
  /// Waits for every launch on the current stream to finish.
  virtual Status synchronize() = 0;
  /// How many blocks of kernel Name the backend runs at once: the CPU
  /// backend's threads; a device's multiprocessors times the blocks of Name
  /// each holds (DeviceDriver::residentBlocks).
  virtual Expected<unsigned> residentBlocks(const std::string &Name, Dim3 Block,
                                            unsigned SharedBytes) = 0;

protected:
  TrafficCounters Counters;
};

/// Where the CPU backend finds the host entry points.
enum class HostCode {
  /// dlopen the artifact's kernels.so (the default).
  SharedObject,
  /// Look the symbols up in the running program, which linked kernels.o
  /// (kvq_add_spec) and exports them.
  Linked,
};

/// A backend on host memory running the artifact's host code on Threads
/// threads (the caller's thread included; 0 means 1). Fails if the host code
/// or one of the manifest's kernels cannot be found.
Expected<std::unique_ptr<Backend>>
createCpuBackend(const Artifact &A, unsigned Threads = 2,
                 HostCode Code = HostCode::SharedObject);

/// The PTX target of A to load on a device of SM version DeviceSm
/// (DeviceDriver::smVersion): Target when given (an error if the device is
/// older), else the newest of the artifact's targets the device loads, or
/// the oldest where DeviceSm is 0 (no GPU: the interpreter).
Expected<std::string> choosePtxTarget(const Artifact &A, unsigned DeviceSm,
                                      const std::string &Target = "");

/// A backend on Driver running the artifact's PTX for Target (empty: as
/// choosePtxTarget picks). Loads the module and resolves every kernel of the
/// manifest up front.
Expected<std::unique_ptr<Backend>>
createDeviceBackend(const Artifact &A, std::unique_ptr<DeviceDriver> Driver,
                    const std::string &Target = "");

/// The device backend on the CUDA driver (device DeviceOrdinal). Fails with
/// "no CUDA driver ..." on machines without one.
Expected<std::unique_ptr<Backend>>
createCudaBackend(const Artifact &A, int DeviceOrdinal = 0,
                  const std::string &Target = "");

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_BACKEND_H
