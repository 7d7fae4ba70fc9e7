//===- InterpDriver.cpp - DeviceDriver backed by the interpreter ----------===//

#include "kvq/PTXInterp/InterpDriver.h"

#include <algorithm>
#include <vector>

using namespace kvq::ptx;
using kvq::runtime::DevicePtr;
using kvq::runtime::KernelHandle;
using kvq::runtime::ModuleHandle;

Expected<ModuleHandle> InterpDriver::loadModule(const std::string &PTX) {
  Expected<Module> M = parseModule(PTX);
  if (!M.ok())
    return M.status();
  auto Owned = std::make_unique<Module>(std::move(*M));
  if (Owned->GlobalBytes) {
    uint64_t Base = Memory.allocate(Owned->GlobalBytes);
    for (const Variable &V : Owned->Variables)
      if (V.Sp == Space::Global && !V.Init.empty()) {
        Status S = Memory.write(Base + V.Offset, V.Init.data(), V.Init.size());
        if (!S.ok())
          return S;
      }
    Owned->placeGlobals(Base);
  }
  Modules.push_back(std::move(Owned));
  return ModuleHandle{Modules.size()};
}

const Module *InterpDriver::module(ModuleHandle Handle) const {
  if (Handle.Id == 0 || Handle.Id > Modules.size())
    return nullptr;
  return Modules[Handle.Id - 1].get();
}

Expected<KernelHandle> InterpDriver::getKernel(ModuleHandle Handle,
                                               const std::string &Name) {
  const Module *M = module(Handle);
  if (!M)
    return Status::error(ErrorCode::Backend, "invalid module handle");
  const Function *F = M->findFunction(Name);
  if (!F || !F->IsEntry)
    return Status::error(ErrorCode::Backend,
                         "no kernel named '" + Name + "' in the module");
  Kernels.push_back({Handle.Id - 1, F});
  return KernelHandle{Kernels.size()};
}

Expected<DevicePtr> InterpDriver::allocate(size_t Bytes) {
  return Memory.allocate(Bytes);
}

Status InterpDriver::free(DevicePtr Ptr) { return Memory.free(Ptr); }

Status InterpDriver::copyToDevice(DevicePtr Dst, const void *Src,
                                  size_t Bytes) {
  return Memory.write(Dst, Src, Bytes);
}

Status InterpDriver::copyToHost(void *Dst, DevicePtr Src, size_t Bytes) {
  return Memory.read(Dst, Src, Bytes);
}

Status InterpDriver::copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) {
  // Through a host buffer: DeviceMemory checks both ranges on read and write.
  std::vector<uint8_t> Staged(Bytes);
  if (Status S = Memory.read(Staged.data(), Src, Bytes); !S.ok())
    return S;
  return Memory.write(Dst, Staged.data(), Bytes);
}

Status InterpDriver::memset(DevicePtr Dst, uint8_t Value, size_t Bytes) {
  return Memory.fill(Dst, Value, Bytes);
}

Expected<const InterpDriver::KernelRef *>
InterpDriver::kernel(KernelHandle Kernel) const {
  if (Kernel.Id == 0 || Kernel.Id > Kernels.size())
    return Status::error(ErrorCode::Backend, "invalid kernel handle");
  return &Kernels[Kernel.Id - 1];
}

Expected<unsigned> InterpDriver::residentBlocks(KernelHandle Kernel,
                                                runtime::Dim3 Block, unsigned) {
  if (Expected<const KernelRef *> K = this->kernel(Kernel); !K.ok())
    return K.status();
  const ModeledDevice &D = Device;
  unsigned Threads = std::max(1u, Block.X * Block.Y * Block.Z);
  // ptxas fits a block's registers in a multiprocessor (launch bounds).
  unsigned Registers =
      std::max(1u, std::min(D.RegistersPerThread,
                            D.RegistersPerMultiprocessor / Threads));
  unsigned PerSM =
      std::min({D.BlocksPerMultiprocessor, D.ThreadsPerMultiprocessor / Threads,
                D.RegistersPerMultiprocessor / (Threads * Registers)});
  return std::max(1u, D.Multiprocessors * PerSM);
}

Status InterpDriver::launch(KernelHandle Kernel, runtime::Dim3 Grid,
                            runtime::Dim3 Block, unsigned DynamicSharedBytes,
                            void **Args) {
  Expected<const KernelRef *> Ref = this->kernel(Kernel);
  if (!Ref.ok())
    return Ref.status();
  const KernelRef &K = **Ref;
  LaunchConfig Config;
  Config.Grid = {Grid.X, Grid.Y, Grid.Z};
  Config.Block = {Block.X, Block.Y, Block.Z};
  Config.DynamicSharedBytes = DynamicSharedBytes;
  Config.MaxWarpInstructions = InstructionLimit;
  Config.CountDistinctSectors = CountDistinctSectors;
  Config.CountLines = CountLines;
  Config.CountLoadWaits = CountLoadWaits;
  if (!K.Fn->Params.empty() && !Args)
    return Status::error(ErrorCode::Backend,
                         "kernel '" + K.Fn->Name + "' needs arguments");
  Config.Params = packParams(*K.Fn, Args);
  return launchKernel(*Modules[K.Module], *K.Fn, Memory, Config, Last);
}
