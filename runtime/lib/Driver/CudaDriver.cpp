//===- CudaDriver.cpp - DeviceDriver over the CUDA driver API -------------===//
//
// libcuda.so.1 is opened with dlopen at run time, so the runtime builds and
// links on machines without a GPU or toolkit and reports the missing driver
// as an ordinary error. The few driver prototypes needed are declared here
// (they are part of the stable CUDA driver ABI) instead of including cuda.h.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/DeviceDriver.h"

#include <dlfcn.h>

#include <algorithm>
#include <vector>

using namespace kvq::runtime;

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUdeviceptr = unsigned long long;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;

/// The driver entry points, resolved by name (the _v2 names are the ones
/// cuda.h maps the unversioned API to).
struct CudaApi {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*CtxSynchronize)();
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int,
                                                        size_t);
  CUresult (*GetErrorString)(CUresult, const char **);
  // Timing (optional: a driver without them answers Unsupported).
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
};

class CudaDriver : public DeviceDriver {
public:
  CudaDriver(void *Library, const CudaApi &Api, CUdevice Device,
             CUcontext Context, std::string DeviceName, unsigned SmVersion)
      : Library(Library), Api(Api), Device(Device), Context(Context),
        DeviceName(std::move(DeviceName)), SmVersion(SmVersion) {}
  ~CudaDriver() override {
    Api.PrimaryCtxRelease(Device);
    dlclose(Library);
  }

  std::string name() const override { return "cuda: " + DeviceName; }
  unsigned smVersion() const override { return SmVersion; }

  Expected<ModuleHandle> loadModule(const std::string &PTX) override {
    CUmodule M = nullptr;
    if (Status S =
            check(Api.ModuleLoadData(&M, PTX.c_str()), "cuModuleLoadData");
        !S.ok())
      return S;
    Modules.push_back(M);
    return ModuleHandle{Modules.size()};
  }

  Expected<KernelHandle> getKernel(ModuleHandle Module,
                                   const std::string &Name) override {
    if (Module.Id == 0 || Module.Id > Modules.size())
      return Status::error(ErrorCode::Backend, "invalid module handle");
    CUfunction F = nullptr;
    if (Status S = check(
            Api.ModuleGetFunction(&F, Modules[Module.Id - 1], Name.c_str()),
            "cuModuleGetFunction(" + Name + ")");
        !S.ok())
      return S;
    Functions.push_back(F);
    return KernelHandle{Functions.size()};
  }

  Expected<DevicePtr> allocate(size_t Bytes) override {
    CUdeviceptr P = 0;
    if (Status S = check(Api.MemAlloc(&P, Bytes), "cuMemAlloc"); !S.ok())
      return S;
    return static_cast<DevicePtr>(P);
  }
  Status free(DevicePtr Ptr) override {
    return check(Api.MemFree(Ptr), "cuMemFree");
  }
  // On the default stream the synchronous copies keep their guarantee for
  // pinned memory too. On a caller's stream, copies from the host are the
  // runtime's own (pageable) metadata, which the driver stages before it
  // returns; copies to the host wait for the stream.
  Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) override {
    if (!Stream)
      return check(Api.MemcpyHtoD(Dst, Src, Bytes), "cuMemcpyHtoD");
    return check(Api.MemcpyHtoDAsync(Dst, Src, Bytes, Stream),
                 "cuMemcpyHtoDAsync");
  }
  Status copyToHost(void *Dst, DevicePtr Src, size_t Bytes) override {
    if (!Stream)
      return check(Api.MemcpyDtoH(Dst, Src, Bytes), "cuMemcpyDtoH");
    if (Status S = check(Api.MemcpyDtoHAsync(Dst, Src, Bytes, Stream),
                         "cuMemcpyDtoHAsync");
        !S.ok())
      return S;
    return check(Api.StreamSynchronize(Stream), "cuStreamSynchronize");
  }
  Status copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) override {
    return check(Api.MemcpyDtoDAsync(Dst, Src, Bytes, Stream),
                 "cuMemcpyDtoDAsync");
  }
  Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) override {
    return check(Api.MemsetD8Async(Dst, Value, Bytes, Stream),
                 "cuMemsetD8Async");
  }
  void setStream(StreamHandle S) override { Stream = static_cast<CUstream>(S); }
  Status launch(KernelHandle Kernel, Dim3 Grid, Dim3 Block,
                unsigned DynamicSharedBytes, void **Args) override {
    Expected<CUfunction> Fn = function(Kernel);
    if (!Fn.ok())
      return Fn.status();
    return check(Api.LaunchKernel(*Fn, Grid.X, Grid.Y, Grid.Z, Block.X, Block.Y,
                                  Block.Z, DynamicSharedBytes, Stream, Args,
                                  nullptr),
                 "cuLaunchKernel");
  }
  Status synchronize() override {
    if (Stream)
      return check(Api.StreamSynchronize(Stream), "cuStreamSynchronize");
    return check(Api.CtxSynchronize(), "cuCtxSynchronize");
  }
  Expected<unsigned> residentBlocks(KernelHandle Kernel, Dim3 Block,
                                    unsigned DynamicSharedBytes) override {
    Expected<CUfunction> Fn = function(Kernel);
    if (!Fn.ok())
      return Fn.status();
    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT is 16 (cuda.h).
    int SMs = 0, PerSM = 0;
    if (Status S = check(Api.DeviceGetAttribute(&SMs, 16, Device),
                         "cuDeviceGetAttribute");
        !S.ok())
      return S;
    if (Status S = check(Api.OccupancyMaxActiveBlocksPerMultiprocessor(
                             &PerSM, *Fn, int(Block.X * Block.Y * Block.Z),
                             DynamicSharedBytes),
                         "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        !S.ok())
      return S;
    return unsigned(std::max(1, SMs * PerSM));
  }

  Expected<StreamHandle> createStream() override {
    CUstream S = nullptr;
    if (!Api.StreamCreate)
      return DeviceDriver::createStream();
    // CU_STREAM_NON_BLOCKING is 1: no implicit order with the default stream.
    if (Status St = check(Api.StreamCreate(&S, 1), "cuStreamCreate"); !St.ok())
      return St;
    return StreamHandle(S);
  }
  Status destroyStream(StreamHandle S) override {
    if (!Api.StreamDestroy)
      return DeviceDriver::destroyStream(S);
    return check(Api.StreamDestroy(static_cast<CUstream>(S)),
                 "cuStreamDestroy");
  }
  Expected<EventHandle> createEvent() override {
    CUevent E = nullptr;
    if (!Api.EventCreate)
      return DeviceDriver::createEvent();
    if (Status St = check(Api.EventCreate(&E, 0), "cuEventCreate"); !St.ok())
      return St;
    return EventHandle(E);
  }
  Status destroyEvent(EventHandle E) override {
    if (!Api.EventDestroy)
      return DeviceDriver::destroyEvent(E);
    return check(Api.EventDestroy(static_cast<CUevent>(E)), "cuEventDestroy");
  }
  Status recordEvent(EventHandle E) override {
    if (!Api.EventRecord)
      return DeviceDriver::recordEvent(E);
    return check(Api.EventRecord(static_cast<CUevent>(E), Stream),
                 "cuEventRecord");
  }
  Expected<double> elapsedSeconds(EventHandle Start, EventHandle End) override {
    if (!Api.EventSynchronize || !Api.EventElapsedTime)
      return DeviceDriver::elapsedSeconds(Start, End);
    if (Status S = check(Api.EventSynchronize(static_cast<CUevent>(End)),
                         "cuEventSynchronize");
        !S.ok())
      return S;
    float Ms = 0;
    if (Status S = check(Api.EventElapsedTime(&Ms, static_cast<CUevent>(Start),
                                              static_cast<CUevent>(End)),
                         "cuEventElapsedTime");
        !S.ok())
      return S;
    return double(Ms) * 1e-3;
  }

private:
  Expected<CUfunction> function(KernelHandle Kernel) const {
    if (Kernel.Id == 0 || Kernel.Id > Functions.size())
      return Status::error(ErrorCode::Backend, "invalid kernel handle");
    return Functions[Kernel.Id - 1];
  }

  void *Library;
  CudaApi Api;
  CUdevice Device;
  CUcontext Context;
  std::string DeviceName;
  unsigned SmVersion;
  std::vector<CUmodule> Modules;
  std::vector<CUfunction> Functions;
  CUstream Stream = nullptr;

  Status check(CUresult R, const std::string &What) const {
    if (R == 0)
      return Status::success();
    const char *Msg = nullptr;
    if (!Api.GetErrorString || Api.GetErrorString(R, &Msg) != 0)
      Msg = nullptr;
    // CUDA_ERROR_OUT_OF_MEMORY is 2 (cuda.h).
    return Status::error(
        R == 2 ? ErrorCode::OutOfMemory : ErrorCode::Backend,
        What + " failed: " +
            (Msg ? std::string(Msg) : "CUDA error " + std::to_string(R)));
  }
};

template <typename Fn> bool resolve(void *Lib, const char *Name, Fn &Out) {
  Out = reinterpret_cast<Fn>(dlsym(Lib, Name));
  return Out != nullptr;
}

} // namespace

Expected<std::unique_ptr<DeviceDriver>>
kvq::runtime::createCudaDriver(int DeviceOrdinal) {
  void *Lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!Lib)
    return Status::error(
        ErrorCode::Backend,
        std::string("no CUDA driver: libcuda.so.1 not found (") + dlerror() +
            ")");
  CudaApi Api{};
  bool Ok =
      resolve(Lib, "cuInit", Api.Init) &&
      resolve(Lib, "cuDeviceGet", Api.DeviceGet) &&
      resolve(Lib, "cuDeviceGetName", Api.DeviceGetName) &&
      resolve(Lib, "cuDevicePrimaryCtxRetain", Api.PrimaryCtxRetain) &&
      resolve(Lib, "cuDevicePrimaryCtxRelease_v2", Api.PrimaryCtxRelease) &&
      resolve(Lib, "cuCtxSetCurrent", Api.CtxSetCurrent) &&
      resolve(Lib, "cuModuleLoadData", Api.ModuleLoadData) &&
      resolve(Lib, "cuModuleGetFunction", Api.ModuleGetFunction) &&
      resolve(Lib, "cuMemAlloc_v2", Api.MemAlloc) &&
      resolve(Lib, "cuMemFree_v2", Api.MemFree) &&
      resolve(Lib, "cuMemcpyHtoD_v2", Api.MemcpyHtoD) &&
      resolve(Lib, "cuMemcpyDtoH_v2", Api.MemcpyDtoH) &&
      resolve(Lib, "cuMemcpyHtoDAsync_v2", Api.MemcpyHtoDAsync) &&
      resolve(Lib, "cuMemcpyDtoHAsync_v2", Api.MemcpyDtoHAsync) &&
      resolve(Lib, "cuMemcpyDtoDAsync_v2", Api.MemcpyDtoDAsync) &&
      resolve(Lib, "cuMemsetD8Async", Api.MemsetD8Async) &&
      resolve(Lib, "cuLaunchKernel", Api.LaunchKernel) &&
      resolve(Lib, "cuCtxSynchronize", Api.CtxSynchronize) &&
      resolve(Lib, "cuStreamSynchronize", Api.StreamSynchronize) &&
      resolve(Lib, "cuDeviceGetAttribute", Api.DeviceGetAttribute) &&
      resolve(Lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
              Api.OccupancyMaxActiveBlocksPerMultiprocessor);
  resolve(Lib, "cuGetErrorString", Api.GetErrorString);
  resolve(Lib, "cuStreamCreate", Api.StreamCreate);
  resolve(Lib, "cuStreamDestroy_v2", Api.StreamDestroy);
  resolve(Lib, "cuEventCreate", Api.EventCreate);
  resolve(Lib, "cuEventDestroy_v2", Api.EventDestroy);
  resolve(Lib, "cuEventRecord", Api.EventRecord);
  resolve(Lib, "cuEventSynchronize", Api.EventSynchronize);
  // cuda.h maps cuEventElapsedTime to _v2 from CUDA 12.8 on; older drivers
  // have only the first.
  if (!resolve(Lib, "cuEventElapsedTime_v2", Api.EventElapsedTime))
    resolve(Lib, "cuEventElapsedTime", Api.EventElapsedTime);
  if (!Ok) {
    dlclose(Lib);
    return Status::error(ErrorCode::Backend,
                         "no CUDA driver: libcuda.so.1 lacks a required "
                         "entry point");
  }
  CUdevice Device = 0;
  CUcontext Context = nullptr;
  char Name[256] = "unknown device";
  const char *Failed = nullptr;
  CUresult R = Api.Init(0);
  if (R != 0)
    Failed = "cuInit";
  if (!Failed && (R = Api.DeviceGet(&Device, DeviceOrdinal)) != 0)
    Failed = "cuDeviceGet";
  if (!Failed && (R = Api.PrimaryCtxRetain(&Context, Device)) != 0)
    Failed = "cuDevicePrimaryCtxRetain";
  if (!Failed && (R = Api.CtxSetCurrent(Context)) != 0) {
    Failed = "cuCtxSetCurrent";
    Api.PrimaryCtxRelease(Device);
  }
  if (Failed) {
    const char *Msg = nullptr;
    if (!Api.GetErrorString || Api.GetErrorString(R, &Msg) != 0)
      Msg = nullptr;
    std::string Why = Msg ? Msg : "CUDA error " + std::to_string(R);
    dlclose(Lib);
    return Status::error(ErrorCode::Backend,
                         std::string("CUDA driver initialization failed: ") +
                             Failed + ": " + Why);
  }
  Api.DeviceGetName(Name, sizeof(Name), Device);
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR are 75 / 76.
  int Major = 0, Minor = 0;
  if (Api.DeviceGetAttribute(&Major, 75, Device) != 0 ||
      Api.DeviceGetAttribute(&Minor, 76, Device) != 0)
    Major = Minor = 0;
  return std::unique_ptr<DeviceDriver>(new CudaDriver(
      Lib, Api, Device, Context, Name, unsigned(10 * Major + Minor)));
}
