// The host object is compiled one kernel at a time, on the context's
// threads, and linked into one relocatable kernels.o: the same object with
// any number of threads, every kernel in it once with its own tables (of
// internal linkage: a reordered scheme's), and the manifest hash once.
// RUN: rm -rf %t && kvq-opt %specs/skvq-reorder-small.mlir --kvq-compile=%t/threads -o /dev/null
// RUN: kvq-opt %specs/skvq-reorder-small.mlir --kvq-compile=%t/serial --mlir-disable-threading -o /dev/null
// RUN: cmp %t/threads/kernels.o %t/serial/kernels.o
// RUN: nm %t/threads/kernels.o | FileCheck %s
// RUN: readelf -h %t/threads/kernels.o | FileCheck %s --check-prefix=ELF
// Both links run the system C compiler; without one, the first is an error.
// RUN: not env PATH=%t/no-such-dir kvq-opt %specs/skvq-reorder-small.mlir --kvq-compile=%t/no-cc -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOCC

// CHECK-DAG: T skvq_reorder_small_attend_0
// CHECK-DAG: T skvq_reorder_small_flush_keys_0
// CHECK-DAG: T skvq_reorder_small_flush_values_0
// CHECK-DAG: r skvq_reorder_small_attend_0_keys_group_size
// CHECK-DAG: R skvq_reorder_small_manifest_hash
// ELF: Type: REL (Relocatable file)
// NOCC: error: no C compiler ('cc') for the partial link of the host objects
