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

def KVQSetModel : Pass<"kvq-set-model", "::kvq::CacheOp"> {
  let summary = "Instantiate a cache's schemes for another model shape";
  let description = [{
    Replaces the model shape of each `kvq.cache` and maps its per-layer
    schedule to the new layer count by relative depth: new layer `i` of `L'`
    takes the scheme of old layer `floor((i + 1/2) * L / L')`, the layer at
    the same depth (AsymKV's "first l of L layers" becomes the first
    `~l * L' / L`). Runs of equal schemes are written back as `kvq.layers`
    ranges. A sharing start (`share <from>`) and an outlier pool's
    `first_layer` move to the first new layer whose old layer is at or past
    them, `from` then rounded up to a multiple of the sharing group.
    Options left at 0 (or an empty dtype) keep the old value; an explicit
    softmax scale is dropped (the new model's is `1/sqrt(head_dim)`).

    A scheme that cannot fit the new shape is an error naming the fix: a
    channel group not dividing `head_dim` (with `clamp-groups`, a group
    wider than the head becomes the head, as SKVQ's g128 on a 64-wide head
    must); tables
    calibrated for the old model (channel reorder, per-group clipping); a
    `pre_rope` that rotates more dimensions than `head_dim`. See
    docs/Rationale.md, "Instantiating a scheme for a model".
  }];
  let options = [
    Option<"layers", "layers", "unsigned", /*default=*/"0", "Layers">,
    Option<"heads", "heads", "unsigned", /*default=*/"0", "Query heads">,
    Option<"kvHeads", "kv_heads", "unsigned", /*default=*/"0",
           "Key/value heads">,
    Option<"headDim", "head_dim", "unsigned", /*default=*/"0", "Head dimension">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"\"",
           "Cache dtype: f16, bf16 or f32">,
    Option<"clampGroups", "clamp-groups", "bool", /*default=*/"false",
           "Channel groups wider than head_dim become one group per head">
  ];
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
