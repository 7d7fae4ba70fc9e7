//===- KVQOps.td - kvq cache declaration ops ---------------*- tablegen -*-===//
//
// A cache is declared by one `kvq.cache` holding a `kvq.keys` and a
// `kvq.values` op; each of those holds the per-layer schedule of schemes.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_DIALECT_KVQ_KVQOPS_TD
#define KVQ_DIALECT_KVQ_KVQOPS_TD

include "kvq/Dialect/KVQ/KVQAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

def KVQ_SchemeAttr : AnyAttrOf<[KVQ_QuantAttr, KVQ_FullPrecisionAttr]>;

def KVQ_CacheOp : KVQ_Op<"cache", [Symbol, IsolatedFromAbove, NoTerminator,
                                   SingleBlock]> {
  let summary = "Declares a quantized KV cache";
  let description = [{
    The model shape, the page size of the quantized region in tokens, an
    optional outlier pool, and exactly one `kvq.keys` and one `kvq.values`.

    ```mlir
    kvq.cache @kivi_2bit model <layers = 32, heads = 32, kv_heads = 32,
                                head_dim = 128, dtype = f16> page 128 {
      kvq.keys window <recent = 1, flush = 128> {
        kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
      }
      kvq.values window <recent = 129, flush = 1> {
        kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
      }
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    KVQ_ModelAttr:$model,
    ConfinedAttr<I64Attr, [IntPositive, IntMaxValue<1048576>]>:$page,
    OptionalAttr<KVQ_PoolAttr>:$pool);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `model` $model `page` $page (`pool` $pool^)? attr-dict-with-keyword
    $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    class KeysOp getKeys();
    class ValuesOp getValues();
    /// Checks that every table a pass reads (reorder permutations and group
    /// sizes) has its data: `dense_resource` blobs can be elided or not yet
    /// loaded when the verifier runs.
    ::mlir::LogicalResult verifyTablesPresent();
  }];
}

class KVQ_TensorOp<string mnemonic, string tensor>
    : KVQ_Op<mnemonic, [HasParent<"CacheOp">, NoTerminator, SingleBlock]> {
  let summary = "Declares how the cache stores its " # tensor;
  let description = [{
    The full-precision windows and flush unit of the }] # tensor # [{, optional
    cross-layer code sharing, and the per-layer schedule: `kvq.layers` ops
    whose half-open ranges `[begin, end)` cover every layer exactly once
    (`kvq-expand-schedule` rewrites them into one `kvq.layer` per layer).
  }];
  let arguments = (ins KVQ_WindowAttr:$window, OptionalAttr<KVQ_ShareAttr>:$share);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `window` $window (`share` $share^)? attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// One scheme per layer, with sharing resolved (the op must verify).
    ::llvm::SmallVector<::kvq::LayerScheme> getLayerSchemes();
  }];
}

def KVQ_KeysOp : KVQ_TensorOp<"keys", "keys">;
def KVQ_ValuesOp : KVQ_TensorOp<"values", "values">;

def KVQ_LayersOp : KVQ_Op<"layers", [ParentOneOf<["KeysOp", "ValuesOp"]>]> {
  let summary = "Scheme of a range of layers";
  let description = [{
    The layers `begin <= l < end` use `scheme`.

    ```mlir
    kvq.layers 0 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
    ```
  }];
  let arguments = (ins
    ConfinedAttr<I64Attr, [IntNonNegative]>:$begin,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$end,
    KVQ_SchemeAttr:$scheme);
  let assemblyFormat = "$begin `to` $end `:` $scheme attr-dict";
}

def KVQ_LayerOp : KVQ_Op<"layer", [ParentOneOf<["KeysOp", "ValuesOp"]>]> {
  let summary = "Scheme of one layer, with sharing resolved";
  let description = [{
    The explicit form the schedule expands to. A layer that reuses another
    layer's codes names it with `codes from`; it stores only its own scale
    and zero-point.

    ```mlir
    kvq.layer 17 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32> codes from 16
    ```
  }];
  let arguments = (ins
    ConfinedAttr<I64Attr, [IntNonNegative]>:$index,
    KVQ_SchemeAttr:$scheme,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$codes_from);
  let assemblyFormat = "$index `:` $scheme (`codes` `from` $codes_from^)? attr-dict";
}

#endif // KVQ_DIALECT_KVQ_KVQOPS_TD
