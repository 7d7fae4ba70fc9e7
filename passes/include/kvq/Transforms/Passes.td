//===- Passes.td - kvq transformation passes ---------------*- tablegen -*-===//

#ifndef KVQ_TRANSFORMS_PASSES_TD
#define KVQ_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KVQExpandSchedule : Pass<"kvq-expand-schedule", "::kvq::CacheOp"> {
  let summary = "Expand per-layer schedules into one explicit scheme per layer";
  let description = [{
    Rewrites the `kvq.layers` ranges of `kvq.keys` and `kvq.values` into one
    `kvq.layer` per layer, in layer order, and resolves cross-layer sharing:
    a layer that reuses another layer's codes gets `codes from <owner>` and
    the `share` attribute is dropped. Later passes read one scheme per layer
    without knowing how the spec grouped them.
  }];
  let dependentDialects = ["::kvq::KVQDialect"];
}

def KVQReportBits : Pass<"kvq-report-bits", "::mlir::ModuleOp"> {
  let summary = "Print the equivalent bits and exact bytes of every cache";
  let description = [{
    For each `kvq.cache`, prints to standard output the asymptotic bits per
    cached element (`code-bits`: codes only, a code-sharing layer counts 0;
    `storage-bits`: codes plus stored scales and zero-points), and the exact
    bytes one sequence of `tokens` tokens occupies, with windows and pools at
    their fixed capacity, the quantized region in whole pages, and metadata
    (block tables, key norms). See docs/BitAccounting.md.
  }];
  let options = [
    Option<"tokens", "tokens", "uint64_t", /*default=*/"4096",
           "Sequence length for the exact byte count">
  ];
}

#endif // KVQ_TRANSFORMS_PASSES_TD
