/*===- main.c - C API smoke test of an installed kvq
-----------------------===*\
|* Opens the artifact kvq_add_spec compiled, appends a prompt to every layer  *|
|* of one sequence and attends; prints "package test ok" on success.         *|
\*===----------------------------------------------------------------------===*/

#include <kvq/kvq.h>

#include <stdio.h>
#include <stdlib.h>

static int check(kvq_status S, const char *What) {
  if (S != KVQ_OK)
    fprintf(stderr, "%s: %s\n", What, kvq_last_error());
  return S != KVQ_OK;
}

int main(void) {
  kvq_artifact *A;
  kvq_cache *C;
  kvq_sequence S;
  uint32_t Layers, Heads, KvHeads, Dim;
  if (check(kvq_artifact_open(KVQ_ARTIFACT_DIR_TEST_CACHE, &A), "open") ||
      check(kvq_artifact_shape(A, &Layers, &Heads, &KvHeads, &Dim, NULL),
            "shape") ||
      check(kvq_cache_create(A, NULL, &C), "create") ||
      check(kvq_cache_add_sequence(C, &S), "add"))
    return 1;
  size_t N = 300 * (size_t)KvHeads * Dim;
  float *K = malloc(N * sizeof(float)), *V = malloc(N * sizeof(float));
  for (size_t I = 0; I < N; ++I) {
    K[I] = (float)(I % 7) - 3.0f;
    V[I] = (float)(I % 5) * 0.25f;
  }
  kvq_append_item Item = {S, 300, K, V, N * sizeof(float), N * sizeof(float)};
  for (uint32_t L = 0; L < Layers; ++L)
    if (check(kvq_cache_append_f32(C, L, &Item, 1), "append"))
      return 1;
  float *Q = calloc((size_t)Heads * Dim, sizeof(float));
  float *Out = calloc((size_t)Heads * Dim, sizeof(float));
  kvq_memory_stats Stats;
  size_t QBytes = (size_t)Heads * Dim * sizeof(float);
  if (check(kvq_cache_attend_f32(C, 0, &S, 1, Q, QBytes, Out, QBytes),
            "attend") ||
      check(kvq_cache_memory_stats(C, &Stats), "stats"))
    return 1;
  printf("out[0] = %f, %.3f bits per element\n", Out[0],
         Stats.bits_per_element);
  kvq_cache_destroy(C);
  kvq_artifact_close(A);
  free(K);
  free(V);
  free(Q);
  free(Out);
  puts("package test ok");
  return 0;
}
