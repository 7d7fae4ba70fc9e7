//===- AsyncCopy.h - cp.async queues of a thread ---------------*- C++ -*-===//
//
// cp.async is modeled asynchronously so that a missing wait is visible: a
// copy is only queued when issued and is performed (source read,
// destination written, zero fill included) when the issuing thread's
// cp.async.wait_group or cp.async.wait_all covers its group. Until then the
// destination keeps its old contents. Copies still pending when a thread
// exits are dropped: nothing could have waited for them.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PTXINTERP_LIB_ASYNCCOPY_H
#define KVQ_PTXINTERP_LIB_ASYNCCOPY_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace kvq::ptx {

/// One thread's cp.async operations, in issue order. Groups are numbered by
/// commit: copies issued after the N-th cp.async.commit_group belong to
/// group N, which stays open (uncommitted) until the next commit.
class AsyncCopyQueue {
public:
  /// Queues a copy of CopySize bytes to Dst, the first SrcSize of them read
  /// from Src and the rest zero.
  void issue(uint8_t *Dst, const uint8_t *Src, unsigned CopySize,
             unsigned SrcSize) {
    Copies.push_back({Dst, Src, static_cast<uint8_t>(CopySize),
                      static_cast<uint8_t>(SrcSize), Committed});
  }
  /// cp.async.commit_group: closes the open group (possibly empty).
  void commit() { ++Committed; }
  /// cp.async.wait_group N: completes every committed group but the newest
  /// N. wait_all is commit() then wait(0).
  void wait(uint64_t Newest) {
    uint64_t Limit = Committed > Newest ? Committed - Newest : 0;
    for (; Head < Copies.size() && Copies[Head].Group < Limit; ++Head) {
      const Copy &C = Copies[Head];
      if (C.SrcSize)
        std::memcpy(C.Dst, C.Src, C.SrcSize);
      std::memset(C.Dst + C.SrcSize, 0, C.Size - C.SrcSize);
    }
    if (Head == Copies.size())
      reset(Committed);
  }
  size_t pending() const { return Copies.size() - Head; }
  /// Drops every pending copy; the next group is numbered Group.
  void reset(uint64_t Group = 0) {
    Copies.clear();
    Head = 0;
    Committed = Group;
  }

private:
  struct Copy {
    uint8_t *Dst;
    const uint8_t *Src;
    uint8_t Size, SrcSize;
    uint64_t Group;
  };
  /// Copies[Head...] are pending.
  std::vector<Copy> Copies;
  size_t Head = 0;
  uint64_t Committed = 0;
};

} // namespace kvq::ptx

#endif // KVQ_PTXINTERP_LIB_ASYNCCOPY_H
