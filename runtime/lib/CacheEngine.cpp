//===- CacheEngine.cpp - Device memory and streams for engines ------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// The engine-facing variants of append and attend: K, V, Q and the output
// are device addresses the engine owns, and the work goes on the engine's
// stream. They share every check and step with the host-pointer forms
// (CacheAppend.cpp, CacheAttend.cpp); only the copies differ (device to
// device instead of host to device) and nothing waits for the device.
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"

#include <algorithm>
#include <new>

using namespace kvq::runtime;

namespace {

/// Issues the backend's work on Stream for one call, then on the default
/// stream again.
class StreamScope {
public:
  StreamScope(Backend &B, StreamHandle Stream) : B(B) { B.setStream(Stream); }
  ~StreamScope() { B.setStream(nullptr); }
  StreamScope(const StreamScope &) = delete;
  StreamScope &operator=(const StreamScope &) = delete;

private:
  Backend &B;
};

const void *asPointer(DevicePtr P) {
  return reinterpret_cast<const void *>(uintptr_t(P));
}

} // namespace

Status Cache::appendDevice(unsigned Layer,
                           const std::vector<DeviceAppendItem> &Batch,
                           StreamHandle Stream) {
  return withoutExceptions([&] {
    // The items travel as AppendItem, device addresses in the pointers.
    std::vector<AppendItem> Items;
    Items.reserve(Batch.size());
    for (const DeviceAppendItem &I : Batch)
      Items.push_back({I.Seq, I.NumTokens, asPointer(I.K), asPointer(I.V)});
    StreamScope Scope(backend(), Stream);
    return P->append(Layer, Items, Impl::Memory::Device);
  });
}

Status Cache::attendDevice(unsigned Layer, const std::vector<SequenceId> &Seqs,
                           DevicePtr Q, DevicePtr Out, StreamHandle Stream,
                           QueryRope Query) {
  return attendDevice(Layer, Seqs, {}, Q, Out, Stream, Query);
}

Status Cache::attendDevice(unsigned Layer, const std::vector<SequenceId> &Seqs,
                           const std::vector<unsigned> &Queries, DevicePtr Q,
                           DevicePtr Out, StreamHandle Stream,
                           QueryRope Query) {
  return withoutExceptions([&] {
    StreamScope Scope(backend(), Stream);
    return P->attend(Layer, Seqs, asPointer(Q),
                     reinterpret_cast<float *>(uintptr_t(Out)),
                     Impl::Memory::Device, {}, Query, Queries);
  });
}

Status Cache::synchronize(StreamHandle Stream) {
  StreamScope Scope(backend(), Stream);
  return backend().synchronize();
}

Expected<AttendPlan> Cache::planAttend(const std::vector<SequenceId> &Seqs,
                                       unsigned MaxTokens, unsigned SplitTokens,
                                       const std::vector<unsigned> &Queries) {
  try {
    if (!Queries.empty() && Queries.size() != Seqs.size())
      return Status::error(ErrorCode::InvalidArgument,
                           "attend plan: " + std::to_string(Queries.size()) +
                               " query counts for " +
                               std::to_string(Seqs.size()) + " sequences");
    if (std::find(Queries.begin(), Queries.end(), 0u) != Queries.end())
      return Status::error(ErrorCode::InvalidArgument,
                           "attend plan: a sequence with 0 queries");
    size_t Rows = countQueryRows(Seqs, Queries);
    uint64_t Longest = MaxTokens;
    for (SequenceId Id : Seqs) {
      Expected<SequenceState *> S = P->find(Id);
      if (!S.ok())
        return S.status();
      for (const SliceCounts &Counts : (*S)->Layers)
        Longest = std::max<uint64_t>(Longest, Counts.Keys.total());
    }
    // OTT pool entries follow a sequence's tokens in the layers with pools.
    uint64_t Entries = manifest().Pool.Entries;
    Expected<SplitPlan> Splits =
        P->planSplits(Longest + Entries, Rows, SplitTokens);
    if (!Splits.ok())
      return Splits.status();
    if (Status St = P->reserveAttend(Rows, Splits->Count); !St.ok())
      return St;
    return AttendPlan{
        Seqs, Queries,
        unsigned(uint64_t(Splits->Count) * Splits->Tokens - Entries), *Splits};
  } catch (const std::bad_alloc &) {
    return Status::error(ErrorCode::OutOfMemory, "out of host memory");
  }
}

Status Cache::attend(unsigned Layer, const AttendPlan &Plan, const void *Q,
                     float *Out, QueryRope Query) {
  return withoutExceptions([&] {
    return P->attend(Layer, Plan.Seqs, Q, Out, Impl::Memory::Host, Plan.Splits,
                     Query, Plan.Queries);
  });
}

Status Cache::attendDevice(unsigned Layer, const AttendPlan &Plan, DevicePtr Q,
                           DevicePtr Out, StreamHandle Stream,
                           QueryRope Query) {
  return withoutExceptions([&] {
    StreamScope Scope(backend(), Stream);
    return P->attend(Layer, Plan.Seqs, asPointer(Q),
                     reinterpret_cast<float *>(uintptr_t(Out)),
                     Impl::Memory::Device, Plan.Splits, Query, Plan.Queries);
  });
}
