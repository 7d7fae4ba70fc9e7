/*===- kvq.h - libkvq_runtime C API -------------------------------*- C -*-===*\
|*                                                                            *|
|* Part of kvq, libkvq_runtime.                                               *|
|*                                                                            *|
|* A thin C wrapper over the C++ API (kvq/Runtime/Runtime.h) for engines that *|
|* are not written in C++. Every function returns a kvq_status; on failure    *|
|* kvq_last_error() returns a message describing it (per thread, valid until  *|
|* the thread's next failing call). A failed call leaves the cache unchanged. *|
|* No C++ exception crosses this API.                                         *|
|*                                                                            *|
|* Threads (docs/Reliability.md): a kvq_cache is not thread-safe; use one per *|
|* thread or serialise every call on it. Caches on different threads run     *|
|* concurrently and may share one artifact. kvq_last_error() is per thread.  *|
|*                                                                            *|
|* Paths (`dir`, `path`) are NUL-terminated: the first NUL ends them. A       *|
|* binding that holds a path with a length (a Python or C++ string) rejects   *|
|* one with an embedded NUL before calling here, as the C++ API does          *|
|* (KVQ_ERROR_INVALID_ARGUMENT), rather than pass on its prefix.              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KVQ_KVQ_H
#define KVQ_KVQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kvq_status {
  KVQ_OK = 0,
  /** A bad argument: null pointer, a buffer size that does not match the
   *  shape, unknown sequence, layer out of range, non-finite values, a
   *  sequence twice in one batch, an unknown enum value, calls out of the
   *  documented order (code-sharing layers after their owner). */
  KVQ_ERROR_INVALID_ARGUMENT = 1,
  /** No free page or sequence slot left. */
  KVQ_ERROR_CAPACITY = 2,
  /** The artifact could not be opened, is malformed, of another version, or
   *  does not match its kernels. */
  KVQ_ERROR_ARTIFACT = 3,
  /** The backend failed (no CUDA driver, a kernel fault). From an append,
   *  the sequences it had begun writing are broken: calls naming them fail
   *  until they are removed. */
  KVQ_ERROR_BACKEND = 4,
  /** A host or device allocation failed. */
  KVQ_ERROR_OUT_OF_MEMORY = 5,
  /** The artifact needs what this machine lacks (CPU features, a PTX
   *  target). */
  KVQ_ERROR_UNSUPPORTED = 6,
  /** A saved cache file cannot be read or written, or is truncated,
   *  corrupt, of another format version or from another artifact. */
  KVQ_ERROR_FILE = 7,
} kvq_status;

typedef struct kvq_artifact kvq_artifact;
typedef struct kvq_cache kvq_cache;
typedef uint64_t kvq_sequence;
/** A device address (CUdeviceptr); a host address on the CPU backend, whose
 *  device memory is host memory. */
typedef uint64_t kvq_device_ptr;
/** A CUDA stream (CUstream); NULL is the default stream. The CPU backend
 *  ignores it. */
typedef void *kvq_stream;

typedef enum kvq_tensor {
  KVQ_TENSOR_KEYS = 0,
  KVQ_TENSOR_VALUES = 1,
} kvq_tensor;

/** Who hands out pages (docs/KernelABI.md, "Engine integration"). */
typedef enum kvq_page_allocator {
  /** The cache, from its own free lists (the default). */
  KVQ_PAGES_CACHE = 0,
  /** The engine: kvq_cache_set_block_tables assigns every sequence its
   *  pages before an append needs them; fork and restore are refused. */
  KVQ_PAGES_ENGINE = 1,
} kvq_page_allocator;

typedef enum kvq_backend {
  KVQ_BACKEND_CPU = 0,
  KVQ_BACKEND_CUDA = 1,
} kvq_backend;

/** The model dtype of an artifact: the element type of K, V and Q. */
typedef enum kvq_dtype {
  KVQ_DTYPE_F16 = 1,
  KVQ_DTYPE_BF16 = 2,
  KVQ_DTYPE_F32 = 3,
} kvq_dtype;

/** How a head's channels pair under RoPE in the keys and queries a cache
 *  takes (#kvq.model's channel_order): the order its channel groups and
 *  calibration tables refer to. The runtime never permutes them. */
typedef enum kvq_channel_order {
  /** The spec holds for either order. */
  KVQ_CHANNEL_ORDER_ANY = 0,
  /** Channel i pairs with i + head_dim/2 (Hugging Face's Llama layout). */
  KVQ_CHANNEL_ORDER_HALF = 1,
  /** Channel 2i pairs with 2i + 1 (Meta's and GGUF's layout). */
  KVQ_CHANNEL_ORDER_INTERLEAVED = 2,
} kvq_channel_order;

typedef struct kvq_cache_options {
  kvq_backend backend;
  uint32_t max_sequences;
  uint32_t pages_per_tensor;
  /** 0: pages_per_tensor. */
  uint32_t max_pages_per_sequence;
  /** CPU backend threads (0: 1; at most 1024). */
  uint32_t threads;
  int32_t cuda_device;
  kvq_page_allocator page_allocator;
  /** KVQ_PAGES_ENGINE: the engine's key and value page pools
   *  (pages_per_tensor x kvq_artifact_page_bytes each, 16-byte aligned), or
   *  0 for pools the cache allocates. */
  kvq_device_ptr engine_page_pools[2];
} kvq_cache_options;

/** New tokens of one sequence: k and v are [num_tokens][Hkv][D], raw model
 *  dtype bits (append) or float (append_f32); k_bytes and v_bytes are their
 *  sizes in bytes, which must match that shape. */
typedef struct kvq_append_item {
  kvq_sequence sequence;
  uint32_t num_tokens;
  const void *k;
  const void *v;
  size_t k_bytes;
  size_t v_bytes;
} kvq_append_item;

/** New tokens of one sequence in device memory: k and v are the addresses
 *  of [num_tokens][Hkv][D] values of the model dtype. */
typedef struct kvq_device_append_item {
  kvq_sequence sequence;
  uint32_t num_tokens;
  kvq_device_ptr k;
  kvq_device_ptr v;
} kvq_device_append_item;

/** Host-device traffic of a cache's backend since it was created. */
typedef struct kvq_traffic {
  uint64_t bytes_to_device;
  uint64_t bytes_to_host;
  uint64_t bytes_within_device;
  uint64_t launches;
  uint64_t synchronizations;
} kvq_traffic;

/** A decode-attention plan of one batch (kvq_cache_plan_attend). */
typedef struct kvq_attend_plan kvq_attend_plan;

typedef struct kvq_memory_stats {
  uint64_t key_pages_in_use;
  uint64_t value_pages_in_use;
  uint64_t bytes_used;
  uint64_t bytes_allocated;
  uint64_t cached_elements;
  double bits_per_element;
} kvq_memory_stats;

/** The message of the calling thread's last failure ("" if none). */
const char *kvq_last_error(void);
/** The name of a status ("KVQ_ERROR_CAPACITY"); "unknown status" for a value
 *  outside the enum. */
const char *kvq_status_name(kvq_status status);

/** Defaults: CPU, 8 sequences, 64 pages per tensor, 2 threads. */
void kvq_cache_options_init(kvq_cache_options *options);

kvq_status kvq_artifact_open(const char *dir, kvq_artifact **out);
void kvq_artifact_close(kvq_artifact *artifact);
/** Model shape of the artifact (any pointer may be null). */
kvq_status kvq_artifact_shape(const kvq_artifact *artifact, uint32_t *layers,
                              uint32_t *heads, uint32_t *kv_heads,
                              uint32_t *head_dim, uint32_t *dtype_bytes);
/** The model dtype of the artifact (f16 and bf16 are distinct). */
kvq_status kvq_artifact_dtype(const kvq_artifact *artifact, kvq_dtype *out);
/** The channel order the artifact's keys and queries are expected in. */
kvq_status kvq_artifact_channel_order(const kvq_artifact *artifact,
                                      kvq_channel_order *out);

/** The cache keeps the artifact alive; the artifact may be closed after. */
kvq_status kvq_cache_create(const kvq_artifact *artifact,
                            const kvq_cache_options *options, kvq_cache **out);
void kvq_cache_destroy(kvq_cache *cache);

kvq_status kvq_cache_add_sequence(kvq_cache *cache, kvq_sequence *out);
kvq_status kvq_cache_remove_sequence(kvq_cache *cache, kvq_sequence sequence);

/** A new sequence sharing the quantized pages of `source` copy-on-write,
 *  with copies of its sinks, windows and key norms (prefix caching, beam
 *  search). */
kvq_status kvq_cache_fork_sequence(kvq_cache *cache, kvq_sequence source,
                                   kvq_sequence *out);

/** Writes `num_sequences` sequences (all live ones when 0) to the cache file
 *  `path` (versioned, checksummed; docs/Reliability.md). */
kvq_status kvq_cache_save(kvq_cache *cache, const char *path,
                          const kvq_sequence *sequences, size_t num_sequences);
/** Adds the sequences saved in `path` as new sequences; their ids go to
 *  `out`, in file order, and their number to `*num_restored`. `capacity`
 *  must cover every free slot (the most a restore can add). A bad file, or
 *  too little room in the cache, changes nothing. */
kvq_status kvq_cache_restore(kvq_cache *cache, const char *path,
                             kvq_sequence *out, size_t capacity,
                             size_t *num_restored);

kvq_status kvq_cache_append(kvq_cache *cache, uint32_t layer,
                            const kvq_append_item *items, size_t num_items);
kvq_status kvq_cache_append_f32(kvq_cache *cache, uint32_t layer,
                                const kvq_append_item *items, size_t num_items);

/** How attend's query relates to the rotary embedding. */
typedef enum kvq_query_rope {
  /** Rotated at the new token's position, as the model computes it. */
  KVQ_QUERY_ROTATED = 0,
  /** Unrotated: the kernel rotates it to position T - 1 of each sequence of
   *  T tokens. Only for layers whose keys are pre-RoPE (else an error). */
  KVQ_QUERY_UNROTATED = 1,
} kvq_query_rope;

/** q: [num_sequences][Hq][D] raw model dtype (attend) or float
 *  (attend_f32), q_bytes bytes; out: [num_sequences][Hq][D] float,
 *  out_bytes bytes. Both sizes must match that shape. */
kvq_status kvq_cache_attend(kvq_cache *cache, uint32_t layer,
                            const kvq_sequence *sequences, size_t num_sequences,
                            const void *q, size_t q_bytes, float *out,
                            size_t out_bytes);
kvq_status kvq_cache_attend_f32(kvq_cache *cache, uint32_t layer,
                                const kvq_sequence *sequences,
                                size_t num_sequences, const float *q,
                                size_t q_bytes, float *out, size_t out_bytes);
/** As kvq_cache_attend and kvq_cache_attend_f32 with the query's rotation
 *  stated (those two take it rotated). */
kvq_status kvq_cache_attend_rope(kvq_cache *cache, uint32_t layer,
                                 const kvq_sequence *sequences,
                                 size_t num_sequences, const void *q,
                                 size_t q_bytes, float *out, size_t out_bytes,
                                 kvq_query_rope query);
kvq_status kvq_cache_attend_f32_rope(kvq_cache *cache, uint32_t layer,
                                     const kvq_sequence *sequences,
                                     size_t num_sequences, const float *q,
                                     size_t q_bytes, float *out,
                                     size_t out_bytes, kvq_query_rope query);

/** Several queries per sequence in one launch (chunked prefill,
 *  speculative verification): sequence i, of T_i tokens in the layer, has
 *  queries[i] queries (1 to T_i), consecutive rows of q and out
 *  ([sum of queries][Hq][D]); its j-th attends its first
 *  T_i - queries[i] + 1 + j tokens, as the cache holds them now. */
kvq_status kvq_cache_attend_queries(kvq_cache *cache, uint32_t layer,
                                    const kvq_sequence *sequences,
                                    size_t num_sequences,
                                    const uint32_t *queries, const void *q,
                                    size_t q_bytes, float *out,
                                    size_t out_bytes, kvq_query_rope query);
kvq_status kvq_cache_attend_queries_f32(kvq_cache *cache, uint32_t layer,
                                        const kvq_sequence *sequences,
                                        size_t num_sequences,
                                        const uint32_t *queries, const float *q,
                                        size_t q_bytes, float *out,
                                        size_t out_bytes, kvq_query_rope query);

/* Engine-facing calls: device memory, streams, plans, engine pages. They
 * issue their work on `stream` and do not wait for it; K, V and Q in device
 * memory are not scanned for non-finite values. Their queries are rotated
 * (KVQ_QUERY_ROTATED); the C++ calls also take unrotated ones. */

kvq_status kvq_cache_append_device(kvq_cache *cache, uint32_t layer,
                                   const kvq_device_append_item *items,
                                   size_t num_items, kvq_stream stream);
/** q: [num_sequences][Hq][D] model dtype, out: the same shape of float, both
 *  device addresses. */
kvq_status kvq_cache_attend_device(kvq_cache *cache, uint32_t layer,
                                   const kvq_sequence *sequences,
                                   size_t num_sequences, kvq_device_ptr q,
                                   kvq_device_ptr out, kvq_stream stream);
/** Waits for the work issued on `stream`. */
kvq_status kvq_cache_synchronize(kvq_cache *cache, kvq_stream stream);

/** Plans attention over `sequences` for contexts of up to `max_tokens`
 *  tokens (at least the longest they hold now); the plan serves every layer
 *  and step until a sequence outgrows it. `split_tokens` pins the split
 *  size (a multiple of the manifest's split_granule, at most the backend's
 *  split_tokens: host.split_tokens on the CPU); 0 lets the runtime choose
 *  it for the batch and device. */
kvq_status kvq_cache_plan_attend(kvq_cache *cache,
                                 const kvq_sequence *sequences,
                                 size_t num_sequences, uint32_t max_tokens,
                                 uint32_t split_tokens, kvq_attend_plan **out);
void kvq_attend_plan_destroy(kvq_attend_plan *plan);
/** As kvq_cache_attend / kvq_cache_attend_device over the plan's batch. */
kvq_status kvq_cache_attend_planned(kvq_cache *cache, uint32_t layer,
                                    const kvq_attend_plan *plan, const void *q,
                                    size_t q_bytes, float *out,
                                    size_t out_bytes);
kvq_status kvq_cache_attend_planned_device(kvq_cache *cache, uint32_t layer,
                                           const kvq_attend_plan *plan,
                                           kvq_device_ptr q, kvq_device_ptr out,
                                           kvq_stream stream);

/** KVQ_PAGES_ENGINE: sets the block-table rows of `tensor` for `sequences`,
 *  CSR: sequence i's pages are indices[indptr[i] : indptr[i + 1]]
 *  (indptr has num_sequences + 1 entries). A row begins with the pages
 *  holding the sequence's tokens. An error changes nothing. */
kvq_status kvq_cache_set_block_tables(kvq_cache *cache, kvq_tensor tensor,
                                      const kvq_sequence *sequences,
                                      size_t num_sequences,
                                      const uint32_t *indptr,
                                      const uint32_t *indices);
/** The bytes and tokens of one page of `tensor` (for engine page pools). */
kvq_status kvq_artifact_page_bytes(const kvq_artifact *artifact,
                                   kvq_tensor tensor, uint64_t *page_bytes,
                                   uint32_t *page_tokens);

kvq_status kvq_cache_traffic(const kvq_cache *cache, kvq_traffic *out);

kvq_status kvq_cache_memory_stats(const kvq_cache *cache,
                                  kvq_memory_stats *out);

/** Groups of keys and of values, over all layers, quantized since the cache
 *  was created whose stored scale or zero-point saturated at the parameter
 *  dtype's largest finite value (finite, but not accurate). */
kvq_status kvq_cache_saturated_groups(kvq_cache *cache, uint64_t *keys,
                                      uint64_t *values);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVQ_KVQ_H */
