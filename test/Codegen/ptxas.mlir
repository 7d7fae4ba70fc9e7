// Every kernel of every spec the code generator supports assembles with
// ptxas for sm_80 and sm_90 without spilling to local memory: the one PTX,
// for sm_80, serves both.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: for spec in fp16 kivi-2bit asymkv-32-0 asymkv-16-0 innerq-base innerq-hybrid innerq-small skvq-k2v2-g128 xquant-mistral-7b xquant-llama2-7b xquant-llama2-7b-chat ott-2bit skvq-k2v2-g128-prerope skvq-reorder-small; do \
// RUN:   kvq-opt %specs/$spec.mlir --kvq-compile=%t/$spec -o /dev/null || exit 1; \
// RUN:   for arch in sm_80 sm_90; do \
// RUN:     %ptxas -arch=$arch -v %t/$spec/kernels.sm_80.ptx -o %t/$spec.$arch.cubin 2>&1 || exit 1; \
// RUN:   done; \
// RUN: done > %t/ptxas.log
// RUN: FileCheck %s --input-file=%t/ptxas.log
// RUN: FileCheck %s --check-prefix=SPILLS --input-file=%t/ptxas.log

// Each kernel reports its spills...
// CHECK-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
// ... and no kernel of any spec, for either architecture, has any.
// SPILLS-NOT: {{[1-9][0-9]*}} bytes spill
