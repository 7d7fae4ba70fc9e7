//===- CpuBackend.cpp - Host memory and the artifact's host code ----------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// Device pointers are host addresses. Kernels are the artifact's host entry
// points `void NAME(void **args, uint32_t bx, uint32_t by, uint32_t bz)`,
// called once per block of the grid on a thread pool, y fastest; a launch
// returns when every block has run, so synchronize() has nothing to wait for.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Backend.h"

#include "ThreadPool.h"
#include "kvq/Support/HostFeatures.h"
#include "kvq/ABI/ManifestBinding.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <system_error>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

using namespace kvq::runtime;

namespace {

using HostKernel = void (*)(void **, uint32_t, uint32_t, uint32_t);

/// Every allocation is aligned for 128-bit (and wider) vector loads.
constexpr size_t kAlignment = 256;
/// Allocations of a huge page or more are aligned to one and advised onto
/// huge pages (transparent huge pages are often enabled for madvised
/// ranges only): a cache read page by page in block-table order otherwise
/// takes a TLB miss every 4 KiB.
constexpr size_t kHugePage = size_t(2) << 20;

class CpuBackend : public Backend {
public:
  CpuBackend(void *Library, std::unordered_map<std::string, HostKernel> Kernels,
             unsigned Threads)
      : Library(Library), Kernels(std::move(Kernels)), Pool(Threads) {}
  ~CpuBackend() override {
    for (void *P : Live)
      std::free(P);
    if (Library)
      dlclose(Library);
  }

  std::string name() const override {
    return "cpu (" + std::to_string(Pool.size()) + " threads)";
  }
  bool readsHostMemory() const override { return true; }
  bool runsHostCode() const override { return true; }
  void forEachOnHost(uint64_t N,
                     const std::function<void(uint64_t)> &Body) override {
    Pool.parallelFor(N, Body);
  }

  Expected<DevicePtr> allocate(size_t Bytes) override {
    // Rounding up a size this close to SIZE_MAX would wrap to a tiny block.
    void *P = nullptr;
    size_t Align = Bytes >= kHugePage ? kHugePage : kAlignment;
    if (Bytes <= SIZE_MAX - Align) {
      size_t Rounded = (Bytes + Align - 1) / Align * Align;
      P = std::aligned_alloc(Align, Rounded ? Rounded : Align);
      // Advice only: without huge pages, 4 KiB pages serve as before.
      if (P && Align == kHugePage)
        (void)madvise(P, Rounded, MADV_HUGEPAGE);
    }
    if (!P)
      return Status::error(ErrorCode::OutOfMemory,
                           "cpu backend: out of memory allocating " +
                               std::to_string(Bytes) + " bytes");
    Live.insert(P);
    return DevicePtr(reinterpret_cast<uintptr_t>(P));
  }

  Status free(DevicePtr Ptr) override {
    void *P = toHost(Ptr);
    if (!Live.erase(P))
      return Status::error(ErrorCode::Backend,
                           "cpu backend: freeing an unknown pointer");
    std::free(P);
    return Status::success();
  }

  Status copyToDevice(DevicePtr Dst, const void *Src, size_t Bytes) override {
    Counters.BytesToDevice += Bytes;
    if (Bytes)
      std::memcpy(toHost(Dst), Src, Bytes);
    return Status::success();
  }

  Status copyToHost(void *Dst, DevicePtr Src, size_t Bytes) override {
    Counters.BytesToHost += Bytes;
    if (Bytes)
      std::memcpy(Dst, toHost(Src), Bytes);
    return Status::success();
  }

  Status copyWithin(DevicePtr Dst, DevicePtr Src, size_t Bytes) override {
    Counters.BytesWithinDevice += Bytes;
    if (Bytes)
      std::memcpy(toHost(Dst), toHost(Src), Bytes);
    return Status::success();
  }

  Status memset(DevicePtr Dst, uint8_t Value, size_t Bytes) override {
    Counters.BytesSet += Bytes;
    if (Bytes)
      std::memset(toHost(Dst), Value, Bytes);
    return Status::success();
  }

  void setStream(StreamHandle) override {}

  Status launch(const std::string &Name, Dim3 Grid, Dim3 Block,
                unsigned SharedBytes, void **Args) override {
    auto It = Kernels.find(Name);
    if (It == Kernels.end())
      return Status::error(ErrorCode::Backend,
                           "cpu backend: unknown kernel '" + Name + "'");
    ++Counters.Launches;
    struct Blocks {
      HostKernel Fn;
      void **Args;
      Dim3 Grid;
      uint64_t XY;
    } L{It->second, Args, Grid, uint64_t(Grid.X) * Grid.Y};
    // One captured pointer keeps the std::function in its inline storage: a
    // launch allocates nothing (appends reserve memory before they launch).
    // y fastest: in the flush and attend grids y is the kv-head, whose
    // input rows (a token's heads) and page slices (a page's heads) are
    // adjacent, so the chunks of blocks a thread claims read memory in
    // order rather than a head's rows 2 KiB apart (docs/Performance.md).
    Pool.parallelFor(L.XY * Grid.Z, [B = &L](uint64_t I) {
      uint64_t XYRem = I % B->XY;
      B->Fn(B->Args, uint32_t(XYRem / B->Grid.Y), uint32_t(XYRem % B->Grid.Y),
            uint32_t(I / B->XY));
    });
    return Status::success();
  }

  Status synchronize() override {
    ++Counters.Synchronizations;
    return Status::success();
  }
  // One block per thread at a time.
  Expected<unsigned> residentBlocks(const std::string &, Dim3,
                                    unsigned) override {
    return Pool.size();
  }

private:
  static void *toHost(DevicePtr P) {
    return reinterpret_cast<void *>(uintptr_t(P));
  }

  void *Library;
  std::unordered_map<std::string, HostKernel> Kernels;
  std::unordered_set<void *> Live;
  ThreadPool Pool;
};

/// Checks that the ELF file at Path holds every byte its loadable segments
/// map: the loader maps them past a truncated file's end and faults
/// (SIGBUS) when it touches them.
Status checkElfComplete(const std::string &Path) {
  auto Bad = [&](const std::string &Why) {
    return Status::error(ErrorCode::Artifact,
                         "cpu backend: host code '" + Path + "' " + Why);
  };
  std::ifstream In(Path, std::ios::binary | std::ios::ate);
  if (!In)
    return Bad("cannot be read");
  uint64_t Size = uint64_t(In.tellg());
  Elf64_Ehdr Header;
  if (!In.seekg(0).read(reinterpret_cast<char *>(&Header), sizeof Header) ||
      std::memcmp(Header.e_ident, ELFMAG, SELFMAG) != 0 ||
      Header.e_ident[EI_CLASS] != ELFCLASS64 ||
      Header.e_phentsize != sizeof(Elf64_Phdr))
    return Bad("is not a 64-bit ELF shared object");
  if (Header.e_phoff > Size ||
      uint64_t(Header.e_phnum) * sizeof(Elf64_Phdr) > Size - Header.e_phoff)
    return Bad("is truncated (program headers)");
  std::vector<Elf64_Phdr> Segments(Header.e_phnum);
  In.seekg(std::streamoff(Header.e_phoff))
      .read(reinterpret_cast<char *>(Segments.data()),
            std::streamsize(Segments.size() * sizeof(Elf64_Phdr)));
  for (const Elf64_Phdr &P : Segments)
    if (P.p_type == PT_LOAD &&
        (P.p_offset > Size || P.p_filesz > Size - P.p_offset))
      return Bad("is truncated: a segment ends at byte " +
                 std::to_string(P.p_offset + P.p_filesz) + " of " +
                 std::to_string(Size));
  return Status::success();
}

/// Opens the code the kernels are looked up in: the artifact's shared
/// object, or the running program.
Expected<void *> openHostCode(const Artifact &A, HostCode Code) {
  if (Code == HostCode::Linked) {
    void *Self = dlopen(nullptr, RTLD_NOW);
    if (!Self)
      return Status::error(ErrorCode::Backend,
                           std::string("cpu backend: ") + dlerror());
    return Self;
  }
  Expected<std::string> Path = A.hostSharedPath();
  if (!Path.ok())
    return Path.status().withContext("cpu backend: artifact '" + A.directory() +
                                     "': ");
  if (Status S = checkElfComplete(*Path); !S.ok())
    return S;
  // A corrupted byte of code would kill the process in the loader or the
  // first launch.
  if (Status S = A.checkHostSharedChecksum(*Path); !S.ok())
    return S.withContext("cpu backend: ");
  void *Lib = dlopen(Path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!Lib)
    return Status::error(ErrorCode::Backend,
                         "cpu backend: cannot load host code '" + *Path +
                             "': " + dlerror());
  return Lib;
}

} // namespace

/// Refuses host code this machine cannot run (it would die by SIGILL),
/// before any of it is loaded.
static Status checkHostFeatures(const Artifact &A) {
  std::string Missing, Unknown;
  for (const std::string &F : A.manifest().HostFeatures) {
    bool Known = false;
    bool Has = kvq::hostHasFeature(F, Known);
    if (!Known)
      Unknown += " " + F;
    else if (!Has)
      Missing += " " + F;
  }
  if (!Unknown.empty())
    return Status::error(
        ErrorCode::Unsupported,
        "cpu backend: artifact '" + A.directory() +
            "' needs CPU features kvq cannot check:" + Unknown);
  if (!Missing.empty())
    return Status::error(
        ErrorCode::Unsupported,
        "cpu backend: the host code of artifact '" + A.directory() +
            "' was compiled for " + A.manifest().HostCpu +
            " and needs CPU features this machine lacks:" + Missing +
            " (recompile with kvq-opt --kvq-host-cpu=native or a CPU this "
            "machine has, e.g. x86-64-v2)");
  return Status::success();
}

Expected<std::unique_ptr<Backend>>
kvq::runtime::createCpuBackend(const Artifact &A, unsigned Threads,
                               HostCode Code) {
  if (Status S = checkHostFeatures(A); !S.ok())
    return S;
  Expected<void *> Lib = openHostCode(A, Code);
  if (!Lib.ok())
    return Lib.status();
  std::unordered_map<std::string, HostKernel> Kernels;
  for (const KernelInfo &K : A.manifest().Kernels) {
    void *Sym = dlsym(*Lib, K.Name.c_str());
    if (!Sym) {
      dlclose(*Lib);
      return Status::error(
          ErrorCode::Backend,
          "cpu backend: host code of artifact '" + A.directory() +
              "' lacks kernel '" + K.Name + "'" +
              (Code == HostCode::Linked ? " (is kernels.o linked and exported?)"
                                        : ""));
    }
    Kernels[K.Name] = reinterpret_cast<HostKernel>(Sym);
  }
  if (Status S = A.checkHostBinding(
          dlsym(*Lib, kvq::getManifestHashSymbol(A.manifest().Name).c_str()));
      !S.ok()) {
    dlclose(*Lib);
    return S.withContext("cpu backend: ");
  }
  try {
    return std::unique_ptr<Backend>(
        new CpuBackend(*Lib, std::move(Kernels), Threads ? Threads : 1));
  } catch (const std::system_error &E) {
    dlclose(*Lib);
    return Status::error(ErrorCode::Backend, "cpu backend: cannot start " +
                                                 std::to_string(Threads) +
                                                 " threads: " + E.what());
  } catch (const std::bad_alloc &) {
    dlclose(*Lib);
    return Status::error(ErrorCode::OutOfMemory,
                         "cpu backend: out of memory starting threads");
  }
}
