//===- CacheFork.cpp - Shared pages, copy-on-write and fork ---------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// A fork shares its source's quantized pages: each physical page counts the
// sequences holding it and returns to the free list when none is left. A
// flush writes quantized positions [Q, Q + f*U) of one layer; before it
// writes into a page another sequence also holds, the writer takes a copy of
// the whole page (every layer's slices) and points its block table at the
// copy. Pages below Q are never written again, so only the page holding
// position Q (partly filled, or filled by other layers only) can be copied.
//
//===----------------------------------------------------------------------===//

#include "CacheImpl.h"

#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <cassert>

using namespace kvq::runtime;

unsigned kvq::runtime::pagesFor(unsigned Quantized, unsigned PageTokens) {
  return (Quantized + PageTokens - 1) / PageTokens;
}

uint32_t Cache::Impl::takePage(Tensor T, SequenceState &S) {
  if (engineAllocates()) {
    // Held since it was assigned.
    std::vector<uint32_t> &Assigned = S.Assigned[int(T)];
    assert(!Assigned.empty() && "no assigned page: callers check first");
    uint32_t Page = Assigned.front();
    Assigned.erase(Assigned.begin());
    return Page;
  }
  std::vector<uint32_t> &Free = FreePages[int(T)];
  assert(!Free.empty() && "no free page: callers check capacity first");
  uint32_t Page = Free.back();
  Free.pop_back();
  PageRefs[int(T)][Page] = 1;
  return Page;
}

void Cache::Impl::returnPage(Tensor T, SequenceState &S, uint32_t Page) {
  if (engineAllocates()) {
    std::vector<uint32_t> &Assigned = S.Assigned[int(T)];
    Assigned.insert(Assigned.begin(), Page);
    return;
  }
  assert(PageRefs[int(T)][Page] == 1 && "a page taken by this sequence alone");
  PageRefs[int(T)][Page] = 0;
  FreePages[int(T)].push_back(Page);
}

void Cache::Impl::releasePage(Tensor T, uint32_t Page) {
  uint32_t &Refs = PageRefs[int(T)][Page];
  assert(Refs > 0 && "releasing a free page");
  // FreePages has room for every page (reserved when allocated).
  if (--Refs == 0 && !engineAllocates())
    FreePages[int(T)].push_back(Page);
}

Status Cache::Impl::checkCacheAllocates(const char *What) const {
  if (!engineAllocates())
    return Status::success();
  return Status::error(ErrorCode::Unsupported,
                       std::string(What) +
                           ": the engine allocates this cache's pages; the "
                           "cache cannot take pages for it");
}

/// The logical pages [First, End) a flush of Plan writes into.
static std::pair<unsigned, unsigned> writtenPages(const AppendPlan &Plan,
                                                  unsigned PageTokens) {
  unsigned Dest = Plan.After.Quantized - Plan.Flushed;
  return {Dest / PageTokens, pagesFor(Plan.After.Quantized, PageTokens)};
}

void Cache::Impl::noteSharedWrites(const SequenceState &S, Tensor T,
                                   const AppendPlan &Plan,
                                   SharedWrites &Writes) const {
  if (!Plan.Flushed)
    return;
  const std::vector<uint32_t> &Pages = S.Pages[int(T)];
  auto [First, End] = writtenPages(Plan, manifest().PageTokens);
  for (unsigned I = First; I < std::min<size_t>(End, Pages.size()); ++I)
    if (PageRefs[int(T)][Pages[I]] > 1)
      ++Writes[Pages[I]];
}

size_t Cache::Impl::copiesNeeded(Tensor T, const SharedWrites &Writes) const {
  size_t Copies = 0;
  for (const auto &[Page, Writers] : Writes)
    Copies += Writers - (Writers == PageRefs[int(T)][Page] ? 1 : 0);
  return Copies;
}

Status Cache::Impl::uploadTable(const SequenceState &S, Tensor T) {
  const std::vector<uint32_t> &Pages = S.Pages[int(T)];
  return B->copyToDevice(tableAddr(T, S.Slot), Pages.data(),
                         Pages.size() * sizeof(uint32_t));
}

Status Cache::Impl::unsharePages(SequenceState &S, Tensor T,
                                 const AppendPlan &Plan) {
  if (!Plan.Flushed)
    return Status::success();
  std::vector<uint32_t> &Pages = S.Pages[int(T)];
  auto [First, End] = writtenPages(Plan, manifest().PageTokens);
  for (unsigned I = First; I < std::min<size_t>(End, Pages.size()); ++I) {
    uint32_t Old = Pages[I];
    if (PageRefs[int(T)][Old] < 2)
      continue;
    uint32_t New = takePage(T, S);
    Status St =
        B->copyWithin(pageAddr(T, New), pageAddr(T, Old), layout(T).PageBytes);
    if (St.ok())
      St = B->copyToDevice(tableAddr(T, S.Slot) + I * sizeof(uint32_t), &New,
                           sizeof(uint32_t));
    if (!St.ok()) {
      // A device failure: keep the shared page, give the copy back.
      releasePage(T, New);
      return St;
    }
    Pages[I] = New;
    releasePage(T, Old);
  }
  return Status::success();
}

/// Copies the sinks, windows, key norms and OTT pools of slot From to slot
/// To.
static Status copySlot(Cache::Impl &C, const SequenceState &From, unsigned To) {
  const Manifest &M = C.manifest();
  for (unsigned L = 0; L < M.Model.Layers; ++L) {
    for (Tensor T : {Tensor::Keys, Tensor::Values}) {
      const TensorCounts &N = From.Layers[L][T];
      if (Status S =
              C.B->copyWithin(C.sinkAddr(T, L, To), C.sinkAddr(T, L, From.Slot),
                              N.Sink * C.rowBytes());
          !S.ok())
        return S;
      // The same ring rows: the fork keeps the source's heads.
      DevicePtr Src = C.windowAddr(T, L, From.Slot),
                Dst = C.windowAddr(T, L, To);
      if (Status S = C.forWindowRuns(T, L, From, 0, N.Window,
                                     [&](DevicePtr Ring, size_t, size_t Bytes) {
                                       return C.B->copyWithin(
                                           Dst + (Ring - Src), Ring, Bytes);
                                     });
          !S.ok())
        return S;
    }
    if (M.hasKeyNorm())
      if (Status S =
              C.B->copyWithin(C.normsAddr(L, To), C.normsAddr(L, From.Slot),
                              C.normBytesPerSlot());
          !S.ok())
        return S;
  }
  auto Sources = C.poolRegions(From.Slot), Dests = C.poolRegions(To);
  for (size_t I = 0; I < Sources.size(); ++I)
    if (Status S = C.B->copyWithin(Dests[I].first, Sources[I].first,
                                   Sources[I].second);
        !S.ok())
      return S;
  return Status::success();
}

Expected<SequenceId> Cache::Impl::fork(SequenceId Source) {
  if (Status St = checkCacheAllocates("fork"); !St.ok())
    return St;
  Expected<SequenceState *> Src = find(Source);
  if (!Src.ok())
    return Src.status();
  if (FreeSlots.empty())
    return Status::error(ErrorCode::Capacity,
                         "fork of sequence " + std::to_string(Source) +
                             ": all " + std::to_string(Options.MaxSequences) +
                             " sequence slots are in use");
  // Allocate first: the state and its map node. The copies stay on the
  // device.
  std::map<SequenceId, SequenceState> Fresh;
  Fresh.emplace(0, **Src).first->second.Slot = FreeSlots.back();
  const SequenceState &S = Fresh.begin()->second;
  std::vector<SequenceId> Ids;
  Ids.reserve(1);
  if (Status St = copySlot(*this, **Src, S.Slot); !St.ok())
    return St;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    if (Status St = uploadTable(S, T); !St.ok())
      return St;
  adopt(Fresh, Ids);
  return Ids.front();
}

void Cache::Impl::adopt(std::map<SequenceId, SequenceState> &Fresh,
                        std::vector<SequenceId> &Ids) {
  assert(Ids.capacity() >= Ids.size() + Fresh.size() && "Ids reserved");
  while (!Fresh.empty()) {
    auto Node = Fresh.extract(Fresh.begin());
    SequenceState &S = Node.mapped();
    assert(FreeSlots.back() == S.Slot && "slots taken from the end");
    FreeSlots.pop_back();
    for (Tensor T : {Tensor::Keys, Tensor::Values})
      for (uint32_t Page : S.Pages[int(T)]) {
        if (PageRefs[int(T)][Page]++ == 0) {
          assert(FreePages[int(T)].back() == Page && "pages from the end");
          FreePages[int(T)].pop_back();
        }
      }
    Node.key() = NextId++;
    Ids.push_back(Node.key());
    Sequences.insert(std::move(Node));
  }
}
