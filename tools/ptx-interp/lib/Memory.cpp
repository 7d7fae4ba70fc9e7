//===- Memory.cpp - Device memory and launch counters ---------------------===//

#include "kvq/PTXInterp/Interpreter.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace kvq::ptx;

/// Unmapped bytes left between allocations so that running off the end of
/// one allocation never lands in the next.
static constexpr uint64_t GuardBytes = 4096;

uint64_t DeviceMemory::allocate(uint64_t Bytes) {
  Allocation A;
  A.Base = Next;
  A.Size = Bytes;
  A.Data.reset(new uint8_t[Bytes ? Bytes : 1]());
  Next += (Bytes + GuardBytes + 255) / 256 * 256;
  uint64_t Base = A.Base;
  Allocations.emplace(Base, std::move(A));
  return Base;
}

Status DeviceMemory::free(uint64_t Address) {
  auto It = Allocations.find(Address);
  if (It == Allocations.end())
    return Status::error(
        ErrorCode::Backend, "free of 0x" + [&] {
          std::ostringstream OS;
          OS << std::hex << Address;
          return OS.str();
        }() + ", which is not the start of a live allocation");
  Allocations.erase(It);
  return Status::success();
}

DeviceMemory::Allocation *DeviceMemory::find(uint64_t Address, uint64_t Bytes) {
  auto It = Allocations.upper_bound(Address);
  if (It == Allocations.begin())
    return nullptr;
  --It;
  Allocation &A = It->second;
  if (Address - A.Base > A.Size || Bytes > A.Size - (Address - A.Base))
    return nullptr;
  return &A;
}

static Status rangeError(const char *What, uint64_t Address, uint64_t Bytes) {
  std::ostringstream OS;
  OS << What << " of " << Bytes << " bytes at 0x" << std::hex << Address
     << " is outside every device allocation";
  return Status::error(ErrorCode::Backend, OS.str());
}

Status DeviceMemory::write(uint64_t Address, const void *Src, uint64_t Bytes) {
  Allocation *A = find(Address, Bytes);
  if (!A)
    return rangeError("copy to device", Address, Bytes);
  std::memcpy(A->Data.get() + (Address - A->Base), Src, Bytes);
  return Status::success();
}

Status DeviceMemory::read(void *Dst, uint64_t Address, uint64_t Bytes) {
  Allocation *A = find(Address, Bytes);
  if (!A)
    return rangeError("copy to host", Address, Bytes);
  std::memcpy(Dst, A->Data.get() + (Address - A->Base), Bytes);
  return Status::success();
}

Status DeviceMemory::fill(uint64_t Address, uint8_t Value, uint64_t Bytes) {
  Allocation *A = find(Address, Bytes);
  if (!A)
    return rangeError("memset", Address, Bytes);
  std::memset(A->Data.get() + (Address - A->Base), Value, Bytes);
  return Status::success();
}

std::string Counters::format() const {
  std::ostringstream OS;
  OS << "warp instructions:      " << WarpInstructions << "\n"
     << "thread instructions:    " << ThreadInstructions << "\n";
  for (int C = 0; C < static_cast<int>(InstClass::Count); ++C)
    OS << "  " << className(static_cast<InstClass>(C)) << ": "
       << WarpInstructionsByClass[C] << "\n";
  OS << "global warp accesses:   " << GlobalWarpAccesses << "\n"
     << "global bytes requested: " << GlobalBytesRequested << "\n"
     << "global sectors (32B):   " << GlobalSectors << "\n";
  if (GlobalDistinctSectors)
    OS << "distinct sectors:       " << GlobalDistinctSectors << "\n";
  OS << "coalescing efficiency:  " << coalescingEfficiency() << "\n"
     << "shared warp accesses:   " << SharedWarpAccesses << "\n"
     << "shared bank conflicts:  " << SharedBankConflicts << "\n"
     << "atomic warp accesses:   " << AtomicWarpAccesses << "\n"
     << "barriers completed:     " << Barriers << "\n";
  if (LoadWaits.total()) {
    uint64_t Most = 0;
    for (const LoadWaitCounts &W : WarpLoadWaits)
      Most = std::max(Most, W.total());
    OS << "load waits:             " << LoadWaits.total() << " (DRAM "
       << LoadWaits.Dram << ", L2 " << LoadWaits.L2 << ", L1 " << LoadWaits.L1
       << "; most of one warp " << Most << "; " << SectorBytesAtWaits
       << " sector bytes in flight at them)\n";
  }
  OS << "seconds:                " << Seconds << "\n"
     << "warp instructions/s:    " << warpInstructionsPerSecond() << "\n";
  return OS.str();
}

std::vector<uint8_t> kvq::ptx::packParams(const Function &Kernel,
                                          void *const *Args) {
  std::vector<uint8_t> Buffer(Kernel.ParamBytes, 0);
  for (size_t I = 0; I < Kernel.Params.size(); ++I)
    std::memcpy(Buffer.data() + Kernel.Params[I].Offset, Args[I],
                Kernel.Params[I].Size);
  return Buffer;
}
