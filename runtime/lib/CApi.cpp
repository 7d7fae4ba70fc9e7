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

#include <new>

using namespace kvq::runtime;

struct kvq_artifact {
  std::shared_ptr<const Artifact> A;
};

struct kvq_cache {
  std::unique_ptr<Cache> C;
};

namespace {

thread_local std::string LastError;

/// Maps a failure to a status code by the runtime's message conventions.
kvq_status classify(const std::string &Message) {
  if (Message.rfind("out of ", 0) == 0 || Message.rfind("cache full", 0) == 0 ||
      Message.find("would need") != std::string::npos)
    return KVQ_ERROR_CAPACITY;
  if (Message.rfind("artifact", 0) == 0 || Message.rfind("manifest", 0) == 0)
    return KVQ_ERROR_ARTIFACT;
  if (Message.rfind("no CUDA driver", 0) == 0 ||
      Message.find("backend") != std::string::npos ||
      Message.rfind("kernel", 0) == 0 || Message.rfind("CUDA", 0) == 0)
    return KVQ_ERROR_BACKEND;
  return KVQ_ERROR_INVALID_ARGUMENT;
}

kvq_status fail(const Status &S) {
  LastError = S.message();
  return classify(S.message());
}

kvq_status fail(kvq_status Code, const char *Message) {
  LastError = Message;
  return Code;
}

kvq_status result(const Status &S) { return S.ok() ? KVQ_OK : fail(S); }

template <typename ItemT, typename DataT>
std::vector<ItemT> convertItems(const kvq_append_item *Items, size_t N) {
  std::vector<ItemT> Out;
  for (size_t I = 0; I < N; ++I)
    Out.push_back({Items[I].sequence, Items[I].num_tokens,
                   static_cast<const DataT *>(Items[I].k),
                   static_cast<const DataT *>(Items[I].v)});
  return Out;
}

} // namespace

extern "C" {

const char *kvq_last_error(void) { return LastError.c_str(); }

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
}

kvq_status kvq_artifact_open(const char *Dir, kvq_artifact **Out) {
  if (!Dir || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_artifact_open: null argument");
  Expected<std::shared_ptr<const Artifact>> A = Artifact::open(Dir);
  if (!A.ok())
    return fail(KVQ_ERROR_ARTIFACT, A.message().c_str());
  *Out = new (std::nothrow) kvq_artifact{std::move(*A)};
  return *Out ? KVQ_OK : fail(KVQ_ERROR_BACKEND, "out of host memory");
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

kvq_status kvq_cache_create(const kvq_artifact *A, const kvq_cache_options *O,
                            kvq_cache **Out) {
  if (!A || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_cache_create: null argument");
  CacheOptions Options;
  if (O) {
    Options.Backend =
        O->backend == KVQ_BACKEND_CUDA ? BackendKind::Cuda : BackendKind::Cpu;
    Options.MaxSequences = O->max_sequences;
    Options.PagesPerTensor = O->pages_per_tensor;
    Options.MaxPagesPerSequence = O->max_pages_per_sequence;
    Options.Threads = O->threads;
    Options.CudaDevice = O->cuda_device;
  }
  Expected<std::unique_ptr<Cache>> C = Cache::create(A->A, Options);
  if (!C.ok())
    return fail(C.status());
  *Out = new (std::nothrow) kvq_cache{std::move(*C)};
  return *Out ? KVQ_OK : fail(KVQ_ERROR_BACKEND, "out of host memory");
}

void kvq_cache_destroy(kvq_cache *C) { delete C; }

kvq_status kvq_cache_add_sequence(kvq_cache *C, kvq_sequence *Out) {
  if (!C || !Out)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_cache_add_sequence: null argument");
  Expected<SequenceId> Id = C->C->addSequence();
  if (!Id.ok())
    return fail(Id.status());
  *Out = *Id;
  return KVQ_OK;
}

kvq_status kvq_cache_remove_sequence(kvq_cache *C, kvq_sequence Seq) {
  if (!C)
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_cache_remove_sequence: null cache");
  return result(C->C->removeSequence(Seq));
}

kvq_status kvq_cache_append(kvq_cache *C, uint32_t Layer,
                            const kvq_append_item *Items, size_t N) {
  if (!C || (N && !Items))
    return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_cache_append: null argument");
  return result(C->C->append(Layer, convertItems<AppendItem, void>(Items, N)));
}

kvq_status kvq_cache_append_f32(kvq_cache *C, uint32_t Layer,
                                const kvq_append_item *Items, size_t N) {
  if (!C || (N && !Items))
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_cache_append_f32: null argument");
  return result(
      C->C->append(Layer, convertItems<AppendItemF32, float>(Items, N)));
}

kvq_status kvq_cache_attend(kvq_cache *C, uint32_t Layer,
                            const kvq_sequence *Seqs, size_t N, const void *Q,
                            float *Out) {
  if (!C || (N && !Seqs))
    return fail(KVQ_ERROR_INVALID_ARGUMENT, "kvq_cache_attend: null argument");
  return result(
      C->C->attend(Layer, std::vector<SequenceId>(Seqs, Seqs + N), Q, Out));
}

kvq_status kvq_cache_attend_f32(kvq_cache *C, uint32_t Layer,
                                const kvq_sequence *Seqs, size_t N,
                                const float *Q, float *Out) {
  if (!C || (N && !Seqs))
    return fail(KVQ_ERROR_INVALID_ARGUMENT,
                "kvq_cache_attend_f32: null argument");
  return result(
      C->C->attendF32(Layer, std::vector<SequenceId>(Seqs, Seqs + N), Q, Out));
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

} // extern "C"
