//===- DeviceDriver.h - Device driver interface for the runtime -*- C++ -*-===//
//
// The kvq runtime's CUDA backend reaches the device only through this small
// interface so that tests can substitute the PTX interpreter for a GPU. The
// header is plain C++17: no LLVM, no CUDA headers, no exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_DEVICEDRIVER_H
#define KVQ_RUNTIME_DEVICEDRIVER_H

#include "kvq/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kvq::runtime {

using kvq::ErrorCode;
using kvq::Expected;
using kvq::Status;

/// A device address: 64 bits, as CUdeviceptr.
using DevicePtr = uint64_t;

/// A CUDA stream (CUstream), opaque here; null is the default stream.
using StreamHandle = void *;

/// A CUDA event (CUevent), opaque here.
using EventHandle = void *;

/// Opaque handles issued by a driver; zero is never a valid handle.
struct ModuleHandle {
  uint64_t Id = 0;
};
struct KernelHandle {
  uint64_t Id = 0;
};

/// Grid or block extents.
struct Dim3 {
  unsigned X = 1, Y = 1, Z = 1;
};

/// The device operations the runtime needs. Calls are not thread-safe.
class DeviceDriver {
public:
  virtual ~DeviceDriver() = default;

  /// A human-readable name ("cuda: <device name>", "ptx-interpreter").
  virtual std::string name() const = 0;
  /// The GPU's SM version (90 for sm_90), which bounds the PTX targets it
  /// loads; 0 for a driver that has no GPU behind it.
  virtual unsigned smVersion() const { return 0; }

  /// Loads (JIT-compiles) a module from PTX text.
  virtual Expected<ModuleHandle> loadModule(const std::string &PTX) = 0;
  /// Looks up an `.entry` of a loaded module by name.
  virtual Expected<KernelHandle> getKernel(ModuleHandle Module,
                                           const std::string &Name) = 0;

  virtual Expected<DevicePtr> allocate(size_t Bytes) = 0;
  virtual Status free(DevicePtr Ptr) = 0;
  virtual Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) = 0;
  virtual Status copyToHost(void *Dst, DevicePtr Src, size_t Bytes) = 0;
  /// Copies between two device ranges that do not overlap.
  virtual Status copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) = 0;
  virtual Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) = 0;

  /// Issues later copies, memsets, launches and synchronize() on Stream
  /// (null: the default stream). copyToDevice still returns only once Src
  /// may be reused, copyToHost once Dst holds the data. A driver that
  /// finishes all work before returning (the interpreter) ignores it.
  virtual void setStream(StreamHandle) {}

  /// Launches Kernel. Args holds one pointer per kernel parameter, pointing
  /// at the parameter's value, exactly as cuLaunchKernel's kernelParams.
  virtual Status launch(KernelHandle Kernel, Dim3 Grid, Dim3 Block,
                        unsigned DynamicSharedBytes, void **Args) = 0;
  /// Waits for all work issued on the current stream to finish.
  virtual Status synchronize() = 0;

  /// How many blocks of Kernel (Block threads, DynamicSharedBytes) the
  /// device runs at once: its multiprocessors times the blocks each holds.
  /// Attention plans its splits to fill them.
  virtual Expected<unsigned> residentBlocks(KernelHandle Kernel, Dim3 Block,
                                            unsigned DynamicSharedBytes) = 0;

  /// Timing on the device's clock, for benchmarks and engines that measure
  /// what they launch: streams and events of the driver's context (the
  /// primary context, which every driver of one device shares). A driver
  /// without a device clock (the interpreter) answers Unsupported.
  virtual Expected<StreamHandle> createStream() { return noClock(); }
  virtual Status destroyStream(StreamHandle) { return noClock(); }
  virtual Expected<EventHandle> createEvent() { return noClock(); }
  virtual Status destroyEvent(EventHandle) { return noClock(); }
  /// Records Event on the current stream (setStream).
  virtual Status recordEvent(EventHandle) { return noClock(); }
  /// Seconds from Start to End, two recorded events; waits for End.
  virtual Expected<double> elapsedSeconds(EventHandle /*Start*/,
                                          EventHandle /*End*/) {
    return noClock();
  }

private:
  Status noClock() const {
    return Status::error(ErrorCode::Unsupported,
                         name() + ": no device clock (streams and events)");
  }
};

/// Opens the CUDA driver (libcuda.so.1, loaded at run time) on device
/// DeviceOrdinal. Fails cleanly, with a message starting "no CUDA driver",
/// where the library is missing, and with the driver's error otherwise.
Expected<std::unique_ptr<DeviceDriver>> createCudaDriver(int DeviceOrdinal = 0);

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_DEVICEDRIVER_H
