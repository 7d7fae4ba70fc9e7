//===- CApi.cpp - The C API over the C++ runtime --------------------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// Handles wrap the C++ objects; every entry point converts a failing Status
// into a kvq_status and stores its message for kvq_last_error().
//
//===----------------------------------------------------------------------===//

#include "kvq/kvq.h"

#include "kvq/Runtime/Runtime.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <new>
#include <type_traits>

using namespace kvq::runtime;

struct kvq_artifact {
  std::shared_ptr<const Artifact> A;
};

struct kvq_cache {
  std::unique_ptr<Cache> C;
};

struct kvq_attend_plan {
  AttendPlan P;
};

namespace {

thread_local std::string LastError;

kvq_status fail(kvq_status Code, std::string Message) {
  LastError = std::move(Message);
  return Code;
}

/// The C code of the runtime's ErrorCode, which the failing operation set
/// where it failed (no message is ever parsed for it).
constexpr kvq_status toStatus(ErrorCode Code) {
  switch (Code) {
  case ErrorCode::InvalidArgument:
    return KVQ_ERROR_INVALID_ARGUMENT;
  case ErrorCode::Capacity:
    return KVQ_ERROR_CAPACITY;
  case ErrorCode::Artifact:
    return KVQ_ERROR_ARTIFACT;
  case ErrorCode::Backend:
    return KVQ_ERROR_BACKEND;
  case ErrorCode::OutOfMemory:
    return KVQ_ERROR_OUT_OF_MEMORY;
  case ErrorCode::Unsupported:
    return KVQ_ERROR_UNSUPPORTED;
  case ErrorCode::File:
    return KVQ_ERROR_FILE;
  }
  return KVQ_ERROR_BACKEND;
}
// kvq.h documents the values; they must not drift from ErrorCode's.
static_assert(toStatus(ErrorCode::InvalidArgument) ==
                  int(ErrorCode::InvalidArgument) &&
              toStatus(ErrorCode::File) == int(ErrorCode::File));

kvq_status fail(const Status &S) {
  return fail(toStatus(S.code()), S.message());
}

kvq_status result(const Status &S) { return S.ok() ? KVQ_OK : fail(S); }

/// Runs an entry point's body: no exception crosses the C API.
template <typename Fn> kvq_status guarded(const char *Entry, Fn &&Body) {
  try {
    return Body();
  } catch (const std::bad_alloc &) {
    return fail(KVQ_ERROR_OUT_OF_MEMORY,
                std::string(Entry) + ": out of host memory");
  } catch (const std::exception &E) {
    return fail(KVQ_ERROR_BACKEND, std::string(Entry) + ": " + E.what());
  } catch (...) {
    return fail(KVQ_ERROR_BACKEND, std::string(Entry) + ": unknown failure");
  }
}

/// Elements of one token of K or V, and of one sequence's Q or output.
size_t tokenElements(const Manifest &M) {
  return size_t(M.Model.KvHeads) * M.Model.HeadDim;
}
size_t queryElements(const Manifest &M) {
  return size_t(M.Model.Heads) * M.Model.HeadDim;
}

/// Checks every item's k_bytes and v_bytes against its shape and converts
/// the items; the C++ API checks the sizes again.
template <typename ItemT, typename DataT>
kvq_status convertItems(const Manifest &M, const kvq_append_item *Items,
                        size_t N, size_t ElementBytes,
                        std::vector<ItemT> &Out) {
  for (size_t I = 0; I < N; ++I) {
    const kvq_append_item &Item = Items[I];
    // AppendItem sizes are bytes, AppendItemF32 sizes are floats.
    constexpr size_t SizeUnit = std::is_same_v<ItemT, AppendItemF32> ? 4 : 1;
    size_t Expected = Item.num_tokens * tokenElements(M) * ElementBytes;
    if (Item.k_bytes != Expected || Item.v_bytes != Expected)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "sequence " + std::to_string(Item.sequence) + ": " +
                      std::to_string(Item.num_tokens) + " tokens need " +
                      std::to_string(Expected) + " bytes of K and of V, got " +
                      std::to_string(Item.k_bytes) + " and " +
                      std::to_string(Item.v_bytes));
    Out.push_back({Item.sequence, Item.num_tokens,
                   static_cast<const DataT *>(Item.k),
                   static_cast<const DataT *>(Item.v), Item.k_bytes / SizeUnit,
                   Item.v_bytes / SizeUnit});
  }
  return KVQ_OK;
}

/// Checks the query and output sizes of an attend of N queries.
kvq_status checkAttendSizes(const Manifest &M, size_t N, size_t QBytes,
                            size_t QElementBytes, size_t OutBytes) {
  size_t Elements = N * queryElements(M);
  if (QBytes != Elements * QElementBytes || OutBytes != Elements * 4)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "attend of " + std::to_string(N) + " queries needs " +
                    std::to_string(Elements * QElementBytes) +
                    " bytes of query and " + std::to_string(Elements * 4) +
                    " of output, got " + std::to_string(QBytes) + " and " +
                    std::to_string(OutBytes));
  return KVQ_OK;
}

template <typename ItemT, typename DataT>
kvq_status appendItems(const char *Entry, kvq_cache *C, uint32_t Layer,
                       const kvq_append_item *Items, size_t N,
                       size_t ElementBytes) {
  return guarded(Entry, [&] {
    if (!C || (N && !Items))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  std::string(Entry) + ": null argument");
    std::vector<ItemT> Batch;
    if (kvq_status S = convertItems<ItemT, DataT>(C->C->manifest(), Items, N,
                                                  ElementBytes, Batch))
      return S;
    return result(C->C->append(Layer, Batch));
  });
}

} // namespace

extern "C" {

const char *kvq_last_error(void) { return LastError.c_str(); }

const char *kvq_status_name(kvq_status Status) {
  // Read as an integer: a C caller may pass any int.
  std::underlying_type_t<kvq_status> Value;
  std::memcpy(&Value, &Status, sizeof Value);
  static const char *const Names[] = {"KVQ_OK",
                                      "KVQ_ERROR_INVALID_ARGUMENT",
                                      "KVQ_ERROR_CAPACITY",
                                      "KVQ_ERROR_ARTIFACT",
                                      "KVQ_ERROR_BACKEND",
                                      "KVQ_ERROR_OUT_OF_MEMORY",
                                      "KVQ_ERROR_UNSUPPORTED",
                                      "KVQ_ERROR_FILE"};
  // A negative value of a signed underlying type wraps to a huge one.
  if (static_cast<uint64_t>(Value) >= std::size(Names))
    return "unknown status";
  return Names[Value];
}

void kvq_cache_options_init(kvq_cache_options *O) {
  if (!O)
    return;
  CacheOptions D;
  O->backend = KVQ_BACKEND_CPU;
  O->max_sequences = D.MaxSequences;
  O->pages_per_tensor = D.PagesPerTensor;
  O->max_pages_per_sequence = D.MaxPagesPerSequence;
  O->threads = D.Threads;
  O->cuda_device = D.CudaDevice;
  O->page_allocator = KVQ_PAGES_CACHE;
  O->engine_page_pools[0] = O->engine_page_pools[1] = 0;
}

kvq_status kvq_artifact_open(const char *Dir, kvq_artifact **Out) {
  return guarded("kvq_artifact_open", [&] {
    if (!Dir || !Out)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_artifact_open: null argument");
    Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
    if (!A.ok())
      return fail(A.status());
    *Out = new kvq_artifact{std::move(*A)};
    return KVQ_OK;
  });
}

void kvq_artifact_close(kvq_artifact *A) { delete A; }

kvq_status kvq_artifact_shape(const kvq_artifact *A, uint32_t *Layers,
                              uint32_t *Heads, uint32_t *KvHeads,
                              uint32_t *HeadDim, uint32_t *DTypeBytes) {
  if (!A)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_artifact_shape: null artifact");
  const ModelShape &M = A->A->manifest().Model;
  if (Layers)
    *Layers = M.Layers;
  if (Heads)
    *Heads = M.Heads;
  if (KvHeads)
    *KvHeads = M.KvHeads;
  if (HeadDim)
    *HeadDim = M.HeadDim;
  if (DTypeBytes)
    *DTypeBytes = byteSize(M.Type);
  return KVQ_OK;
}

kvq_status kvq_artifact_channel_order(const kvq_artifact *A,
                                      kvq_channel_order *Out) {
  if (!A || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_artifact_channel_order: null argument");
  switch (A->A->manifest().Model.Channels) {
  case ChannelOrder::Any:
    *Out = KVQ_CHANNEL_ORDER_ANY;
    break;
  case ChannelOrder::Half:
    *Out = KVQ_CHANNEL_ORDER_HALF;
    break;
  case ChannelOrder::Interleaved:
    *Out = KVQ_CHANNEL_ORDER_INTERLEAVED;
    break;
  }
  return KVQ_OK;
}

kvq_status kvq_artifact_dtype(const kvq_artifact *A, kvq_dtype *Out) {
  if (!A || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_artifact_dtype: null argument");
  switch (A->A->manifest().Model.Type) {
  case DType::F16:
    *Out = KVQ_DTYPE_F16;
    break;
  case DType::BF16:
    *Out = KVQ_DTYPE_BF16;
    break;
  case DType::F32:
    *Out = KVQ_DTYPE_F32;
    break;
  }
  return KVQ_OK;
}

kvq_status kvq_cache_create(const kvq_artifact *A, const kvq_cache_options *O,
                            kvq_cache **Out) {
  return guarded("kvq_cache_create", [&] {
    if (!A || !Out)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_create: null argument");
    CacheOptions Options;
    if (O) {
      // Read as an integer: a C caller may store any int in the field, and
      // loading an out-of-range value as the enum is undefined in C++.
      std::underlying_type_t<kvq_backend> Backend;
      std::memcpy(&Backend, &O->backend, sizeof Backend);
      if (Backend != KVQ_BACKEND_CPU && Backend != KVQ_BACKEND_CUDA)
        return fail(KVQ_ERROR_INVALID_ARGUMENT,
                    "kvq_cache_create: unknown backend " +
                        std::to_string(Backend));
      Options.Backend =
          Backend == KVQ_BACKEND_CUDA ? BackendKind::Cuda : BackendKind::Cpu;
      Options.MaxSequences = O->max_sequences;
      Options.PagesPerTensor = O->pages_per_tensor;
      Options.MaxPagesPerSequence = O->max_pages_per_sequence;
      Options.Threads = O->threads;
      Options.CudaDevice = O->cuda_device;
      std::underlying_type_t<kvq_page_allocator> Allocator;
      std::memcpy(&Allocator, &O->page_allocator, sizeof Allocator);
      if (Allocator != KVQ_PAGES_CACHE && Allocator != KVQ_PAGES_ENGINE)
        return fail(KVQ_ERROR_INVALID_ARGUMENT,
                    "kvq_cache_create: unknown page allocator " +
                        std::to_string(Allocator));
      Options.Allocator = Allocator == KVQ_PAGES_ENGINE ? PageAllocator::Engine
                                                        : PageAllocator::Cache;
      Options.EnginePagePools[0] = O->engine_page_pools[0];
      Options.EnginePagePools[1] = O->engine_page_pools[1];
    }
    Expected<std::unique_ptr<Cache>> C = Cache::create(A->A, Options);
    if (!C.ok())
      return fail(C.status());
    *Out = new kvq_cache{std::move(*C)};
    return KVQ_OK;
  });
}

void kvq_cache_destroy(kvq_cache *C) { delete C; }

kvq_status kvq_cache_add_sequence(kvq_cache *C, kvq_sequence *Out) {
  return guarded("kvq_cache_add_sequence", [&] {
    if (!C || !Out)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_add_sequence: null argument");
    Expected<SequenceId> Id = C->C->addSequence();
    if (!Id.ok())
      return fail(Id.status());
    *Out = *Id;
    return KVQ_OK;
  });
}

kvq_status kvq_cache_remove_sequence(kvq_cache *C, kvq_sequence Seq) {
  return guarded("kvq_cache_remove_sequence", [&] {
    if (!C)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_remove_sequence: null cache");
    return result(C->C->removeSequence(Seq));
  });
}

kvq_status kvq_cache_fork_sequence(kvq_cache *C, kvq_sequence Source,
                                   kvq_sequence *Out) {
  return guarded("kvq_cache_fork_sequence", [&] {
    if (!C || !Out)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_fork_sequence: null argument");
    Expected<SequenceId> Id = C->C->forkSequence(Source);
    if (!Id.ok())
      return fail(Id.status());
    *Out = *Id;
    return KVQ_OK;
  });
}

kvq_status kvq_cache_save(kvq_cache *C, const char *Path,
                          const kvq_sequence *Seqs, size_t N) {
  return guarded("kvq_cache_save", [&] {
    if (!C || !Path || (N && !Seqs))
      return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_cache_save: null argument");
    return result(C->C->save(Path, std::vector<SequenceId>(Seqs, Seqs + N)));
  });
}

kvq_status kvq_cache_restore(kvq_cache *C, const char *Path, kvq_sequence *Out,
                             size_t Capacity, size_t *NumRestored) {
  return guarded("kvq_cache_restore", [&] {
    if (!C || !Path || !NumRestored || (Capacity && !Out))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_restore: null argument");
    // Checked first, so that a successful restore always reports its ids.
    if (Capacity < C->C->options().MaxSequences - C->C->numSequences())
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_restore: room for " + std::to_string(Capacity) +
                      " ids; pass room for every free slot (" +
                      std::to_string(C->C->options().MaxSequences -
                                     C->C->numSequences()) +
                      ")");
    Expected<std::vector<SequenceId>> Ids = C->C->restore(Path);
    if (!Ids.ok())
      return fail(Ids.status());
    std::copy(Ids->begin(), Ids->end(), Out);
    *NumRestored = Ids->size();
    return KVQ_OK;
  });
}

kvq_status kvq_cache_append(kvq_cache *C, uint32_t Layer,
                            const kvq_append_item *Items, size_t N) {
  size_t Bytes = C ? byteSize(C->C->manifest().Model.Type) : 0;
  return appendItems<AppendItem, void>("kvq_cache_append", C, Layer, Items, N,
                                       Bytes);
}

kvq_status kvq_cache_append_f32(kvq_cache *C, uint32_t Layer,
                                const kvq_append_item *Items, size_t N) {
  return appendItems<AppendItemF32, float>("kvq_cache_append_f32", C, Layer,
                                           Items, N, sizeof(float));
}

kvq_status kvq_cache_attend(kvq_cache *C, uint32_t Layer,
                            const kvq_sequence *Seqs, size_t N, const void *Q,
                            size_t QBytes, float *Out, size_t OutBytes) {
  return kvq_cache_attend_rope(C, Layer, Seqs, N, Q, QBytes, Out, OutBytes,
                               KVQ_QUERY_ROTATED);
}

kvq_status kvq_cache_attend_f32(kvq_cache *C, uint32_t Layer,
                                const kvq_sequence *Seqs, size_t N,
                                const float *Q, size_t QBytes, float *Out,
                                size_t OutBytes) {
  return kvq_cache_attend_f32_rope(C, Layer, Seqs, N, Q, QBytes, Out, OutBytes,
                                   KVQ_QUERY_ROTATED);
}

/// The C++ query rotation of `Query`, or an error for an unknown value.
static Expected<QueryRope> toQueryRope(kvq_query_rope Query) {
  if (Query == KVQ_QUERY_ROTATED)
    return QueryRope::Rotated;
  if (Query == KVQ_QUERY_UNROTATED)
    return QueryRope::Unrotated;
  return Status::error(ErrorCode::InvalidArgument,
                       "attend: unknown kvq_query_rope " +
                           std::to_string(int(Query)));
}

kvq_status kvq_cache_attend_rope(kvq_cache *C, uint32_t Layer,
                                 const kvq_sequence *Seqs, size_t N,
                                 const void *Q, size_t QBytes, float *Out,
                                 size_t OutBytes, kvq_query_rope Query) {
  return guarded("kvq_cache_attend", [&] {
    if (!C || (N && !Seqs))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_attend: null argument");
    const Manifest &M = C->C->manifest();
    if (kvq_status S =
            checkAttendSizes(M, N, QBytes, byteSize(M.Model.Type), OutBytes))
      return S;
    Expected<QueryRope> Rope = toQueryRope(Query);
    if (!Rope.ok())
      return result(Rope.status());
    return result(C->C->attend(Layer, std::vector<SequenceId>(Seqs, Seqs + N),
                               Q, Out, *Rope));
  });
}

kvq_status kvq_cache_attend_f32_rope(kvq_cache *C, uint32_t Layer,
                                     const kvq_sequence *Seqs, size_t N,
                                     const float *Q, size_t QBytes, float *Out,
                                     size_t OutBytes, kvq_query_rope Query) {
  return guarded("kvq_cache_attend_f32", [&] {
    if (!C || (N && !Seqs))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_attend_f32: null argument");
    if (kvq_status S = checkAttendSizes(C->C->manifest(), N, QBytes,
                                        sizeof(float), OutBytes))
      return S;
    Expected<QueryRope> Rope = toQueryRope(Query);
    if (!Rope.ok())
      return result(Rope.status());
    return result(C->C->attendF32(
        Layer, std::vector<SequenceId>(Seqs, Seqs + N), Q, Out, *Rope));
  });
}

/// The common part of kvq_cache_attend_queries and its f32 form:
/// `QElementBytes` bytes a query element, `Attend` the Cache call.
static kvq_status attendQueries(
    const char *Entry, kvq_cache *C, const kvq_sequence *Seqs, size_t N,
    const uint32_t *Queries, size_t QBytes, size_t QElementBytes,
    size_t OutBytes, kvq_query_rope Query,
    const std::function<Status(const std::vector<SequenceId> &,
                               const std::vector<unsigned> &, QueryRope)>
        &Attend) {
  return guarded(Entry, [&] {
    if (!C || (N && (!Seqs || !Queries)))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  std::string(Entry) + ": null argument");
    std::vector<SequenceId> Ids(Seqs, Seqs + N);
    std::vector<unsigned> Counts(Queries, Queries + N);
    size_t Rows = countQueryRows(Ids, Counts);
    size_t ElementBytes =
        QElementBytes ? QElementBytes : byteSize(C->C->manifest().Model.Type);
    if (kvq_status S = checkAttendSizes(C->C->manifest(), Rows, QBytes,
                                        ElementBytes, OutBytes))
      return S;
    Expected<QueryRope> Rope = toQueryRope(Query);
    if (!Rope.ok())
      return result(Rope.status());
    return result(Attend(Ids, Counts, *Rope));
  });
}

kvq_status kvq_cache_attend_queries(kvq_cache *C, uint32_t Layer,
                                    const kvq_sequence *Seqs, size_t N,
                                    const uint32_t *Queries, const void *Q,
                                    size_t QBytes, float *Out, size_t OutBytes,
                                    kvq_query_rope Query) {
  // 0: the model dtype's bytes, read once the cache is known not null.
  return attendQueries("kvq_cache_attend_queries", C, Seqs, N, Queries, QBytes,
                       /*QElementBytes=*/0, OutBytes, Query,
                       [&](const std::vector<SequenceId> &Ids,
                           const std::vector<unsigned> &Counts,
                           QueryRope Rope) {
                         return C->C->attend(Layer, Ids, Counts, Q, Out, Rope);
                       });
}

kvq_status kvq_cache_attend_queries_f32(kvq_cache *C, uint32_t Layer,
                                        const kvq_sequence *Seqs, size_t N,
                                        const uint32_t *Queries, const float *Q,
                                        size_t QBytes, float *Out,
                                        size_t OutBytes, kvq_query_rope Query) {
  return attendQueries(
      "kvq_cache_attend_queries_f32", C, Seqs, N, Queries, QBytes,
      sizeof(float), OutBytes, Query,
      [&](const std::vector<SequenceId> &Ids,
          const std::vector<unsigned> &Counts, QueryRope Rope) {
        return C->C->attendF32(Layer, Ids, Counts, Q, Out, Rope);
      });
}

kvq_status kvq_cache_append_device(kvq_cache *C, uint32_t Layer,
                                   const kvq_device_append_item *Items,
                                   size_t N, kvq_stream Stream) {
  return guarded("kvq_cache_append_device", [&] {
    if (!C || (N && !Items))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_append_device: null argument");
    std::vector<DeviceAppendItem> Batch;
    for (size_t I = 0; I < N; ++I)
      Batch.push_back(
          {Items[I].sequence, Items[I].num_tokens, Items[I].k, Items[I].v});
    return result(C->C->appendDevice(Layer, Batch, Stream));
  });
}

kvq_status kvq_cache_attend_device(kvq_cache *C, uint32_t Layer,
                                   const kvq_sequence *Seqs, size_t N,
                                   kvq_device_ptr Q, kvq_device_ptr Out,
                                   kvq_stream Stream) {
  return guarded("kvq_cache_attend_device", [&] {
    if (!C || (N && !Seqs))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_attend_device: null argument");
    return result(C->C->attendDevice(
        Layer, std::vector<SequenceId>(Seqs, Seqs + N), Q, Out, Stream));
  });
}

kvq_status kvq_cache_synchronize(kvq_cache *C, kvq_stream Stream) {
  return guarded("kvq_cache_synchronize", [&] {
    if (!C)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_synchronize: null cache");
    return result(C->C->synchronize(Stream));
  });
}

kvq_status kvq_cache_plan_attend(kvq_cache *C, const kvq_sequence *Seqs,
                                 size_t N, uint32_t MaxTokens,
                                 uint32_t SplitTokens, kvq_attend_plan **Out) {
  return guarded("kvq_cache_plan_attend", [&] {
    if (!C || !Out || (N && !Seqs))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_plan_attend: null argument");
    Expected<AttendPlan> P = C->C->planAttend(
        std::vector<SequenceId>(Seqs, Seqs + N), MaxTokens, SplitTokens);
    if (!P.ok())
      return fail(P.status());
    *Out = new kvq_attend_plan{std::move(*P)};
    return KVQ_OK;
  });
}

void kvq_attend_plan_destroy(kvq_attend_plan *P) { delete P; }

kvq_status kvq_cache_attend_planned(kvq_cache *C, uint32_t Layer,
                                    const kvq_attend_plan *P, const void *Q,
                                    size_t QBytes, float *Out,
                                    size_t OutBytes) {
  return guarded("kvq_cache_attend_planned", [&] {
    if (!C || !P)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_attend_planned: null argument");
    const Manifest &M = C->C->manifest();
    if (kvq_status S = checkAttendSizes(M, P->P.Seqs.size(), QBytes,
                                        byteSize(M.Model.Type), OutBytes))
      return S;
    return result(C->C->attend(Layer, P->P, Q, Out));
  });
}

kvq_status kvq_cache_attend_planned_device(kvq_cache *C, uint32_t Layer,
                                           const kvq_attend_plan *P,
                                           kvq_device_ptr Q, kvq_device_ptr Out,
                                           kvq_stream Stream) {
  return guarded("kvq_cache_attend_planned_device", [&] {
    if (!C || !P)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_attend_planned_device: null argument");
    return result(C->C->attendDevice(Layer, P->P, Q, Out, Stream));
  });
}

kvq_status kvq_cache_set_block_tables(kvq_cache *C, kvq_tensor Which,
                                      const kvq_sequence *Seqs, size_t N,
                                      const uint32_t *Indptr,
                                      const uint32_t *Indices) {
  return guarded("kvq_cache_set_block_tables", [&] {
    std::underlying_type_t<kvq_tensor> T;
    std::memcpy(&T, &Which, sizeof T);
    if (!C || (N && (!Seqs || !Indptr)))
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_set_block_tables: null argument");
    if (T != KVQ_TENSOR_KEYS && T != KVQ_TENSOR_VALUES)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_set_block_tables: unknown tensor " +
                      std::to_string(T));
    return result(C->C->setBlockTables(
        T == KVQ_TENSOR_KEYS ? Tensor::Keys : Tensor::Values,
        std::vector<SequenceId>(Seqs, Seqs + N), Indptr, Indices));
  });
}

kvq_status kvq_artifact_page_bytes(const kvq_artifact *A, kvq_tensor Which,
                                   uint64_t *PageBytes, uint32_t *PageTokens) {
  std::underlying_type_t<kvq_tensor> T;
  std::memcpy(&T, &Which, sizeof T);
  if (!A)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_artifact_page_bytes: null artifact");
  if (T != KVQ_TENSOR_KEYS && T != KVQ_TENSOR_VALUES)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_artifact_page_bytes: unknown tensor " + std::to_string(T));
  const Manifest &M = A->A->manifest();
  if (PageBytes)
    *PageBytes = M.tensor(T == KVQ_TENSOR_KEYS ? Tensor::Keys : Tensor::Values)
                     .PageBytes;
  if (PageTokens)
    *PageTokens = M.PageTokens;
  return KVQ_OK;
}

kvq_status kvq_cache_traffic(const kvq_cache *C, kvq_traffic *Out) {
  if (!C || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_cache_traffic: null argument");
  const TrafficCounters &T = C->C->backend().counters();
  *Out = {T.BytesToDevice, T.BytesToHost, T.BytesWithinDevice, T.Launches,
          T.Synchronizations};
  return KVQ_OK;
}

kvq_status kvq_cache_memory_stats(const kvq_cache *C, kvq_memory_stats *Out) {
  if (!C || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_cache_memory_stats: null argument");
  MemoryStats S = C->C->memoryStats();
  Out->key_pages_in_use = S.KeyPagesInUse;
  Out->value_pages_in_use = S.ValuePagesInUse;
  Out->bytes_used = S.BytesUsed;
  Out->bytes_allocated = S.BytesAllocated;
  Out->cached_elements = S.CachedElements;
  Out->bits_per_element = S.BitsPerElement;
  return KVQ_OK;
}

kvq_status kvq_cache_saturated_groups(kvq_cache *C, uint64_t *Keys,
                                      uint64_t *Values) {
  return guarded("kvq_cache_saturated_groups", [&] {
    if (!C || !Keys || !Values)
      return fail(KVQ_ERROR_INVALID_ARGUMENT,
                  "kvq_cache_saturated_groups: null argument");
    for (auto [T, Out] :
         {std::pair(Tensor::Keys, Keys), std::pair(Tensor::Values, Values)}) {
      Expected<std::vector<uint32_t>> Counts = C->C->saturatedGroups(T);
      if (!Counts.ok())
        return fail(Counts.status());
      *Out = 0;
      for (uint32_t N : *Counts)
        *Out += N;
    }
    return KVQ_OK;
  });
}

} // extern "C"
