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
include "mlir/Interfaces/SideEffectInterfaces.td"

def KVQ_SchemeAttr : AnyAttrOf<[KVQ_QuantAttr, KVQ_FullPrecisionAttr]>;

def KVQ_CacheOp : KVQ_Op<"cache", [Symbol, IsolatedFromAbove, NoTerminator,
                                   SingleBlock]> {
  let summary = "Declares a quantized KV cache";
  let description = [{
    The model shape, the page size of the quantized region in tokens, an
    optional outlier pool, and exactly one `kvq.keys` and one `kvq.values`.
    The name is an identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 128
    characters): it names the artifact's directory, the kernels' LLVM
    symbols and PTX entries.

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
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    class KeysOp getKeys();
    class ValuesOp getValues();
    /// The order of the channels the cache takes: the model's
    /// channel_order, else the pre-RoPE keys' rotation style, else Any.
    ::kvq::ChannelOrder getChannelOrder();
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

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

class KVQ_KernelOp<string mnemonic, string kind>
    : KVQ_Op<mnemonic, [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Declares the " # kind # " kernel of a cache";
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$cache,
    DenseI64ArrayAttr:$layers);
  let assemblyFormat = [{
    $sym_name `of` $cache `layers` $layers attr-dict
  }];
  let extraClassDeclaration = [{
    /// The cache this kernel serves (the op must verify).
    CacheOp getCacheOp();
  }];
}

def KVQ_FlushKernelOp : KVQ_Op<"flush_kernel",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Declares a quantize-and-pack (flush) kernel";
  let description = [{
    The kernel that moves flushed tokens of `keys` or `values` into the
    quantized pages of every listed layer (they share one scheme): block
    (u, h) quantizes flush unit u of kv-head h from the staging buffer,
    computing each group's parameters and codes as docs/Numerics.md defines
    and packing them as docs/KernelABI.md lays out.

    ```mlir
    kvq.flush_kernel @kvq_flush_keys_0 of @kivi_2bit keys layers [0, 1]
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$cache,
    KVQ_TensorKind:$tensor,
    DenseI64ArrayAttr:$layers);
  let assemblyFormat = [{
    $sym_name `of` $cache $tensor `layers` $layers attr-dict
  }];
  let extraClassDeclaration = [{
    CacheOp getCacheOp();
  }];
}

def KVQ_KeyNormKernelOp : KVQ_KernelOp<"keynorm_kernel", "key-norm"> {
  let description = [{
    InnerQ's per-channel key norms over a prompt: block h writes
    n_c = sqrt(max_t |K_t,c|) (1 where the max is 0) for kv-head h.
  }];
}

def KVQ_TrackKernelOp : KVQ_KernelOp<"track_kernel", "outlier-tracking"> {
  let description = [{
    OTT's outlier tracking, run on the staged flush units of keys and values
    before the flush kernels quantize them: block h updates kv-head h's
    outlier pool and extra pool unit by unit and replaces the tokens that
    enter the pool by the mean of their unit's other tokens
    (docs/Numerics.md, "Outlier tokens (OTT)").

    ```mlir
    kvq.track_kernel @ott_track of @ott_2bit layers [2, 3]
    ```
  }];
}

def KVQ_AttendKernelOp : KVQ_KernelOp<"attend_kernel", "decode attention"> {
  let description = [{
    Fused dequantize + decode attention over one split of a sequence's
    tokens (flash-decoding) for all query heads of one kv-head, in the
    listed layers (which share their key and value schemes). Scales and
    zero-points are folded into the dot products; the last block of a
    kv-head to finish merges the splits' softmax partials into the
    attention output. `kvq-select-forms` records the forms its loops take
    on the host CPU (`cpu`) and the GPU (`gpu`); `kvq-lower-kernels` needs
    them.

    ```mlir
    kvq.attend_kernel @kvq_attend_0 of @kivi_2bit layers [0, 1]
        cpu <keys = token_blocks_i16, values = channel_groups_i16>
        gpu <keys = token_blocks_matrix, values = channel_groups_matrix>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$cache,
    DenseI64ArrayAttr:$layers,
    OptionalAttr<KVQ_AttendFormsAttr>:$cpu_forms,
    OptionalAttr<KVQ_AttendFormsAttr>:$gpu_forms);
  let assemblyFormat = [{
    $sym_name `of` $cache `layers` $layers
    (`cpu` $cpu_forms^)? (`gpu` $gpu_forms^)? attr-dict
  }];
}

def KVQ_DequantizeOp : KVQ_Op<"dequantize", [Pure]> {
  let summary = "Reconstructs one element from its stored code and parameters";
  let description = [{
    The reconstruction of docs/Numerics.md for `scheme`: `c * s + z`
    (asym and calibrated asym), `(c - 2^(b-1)) * s` (sym), the sign of the
    stored scale choosing between them (hybrid). `code` is the stored
    (unsigned) code; `scale` and `zero` the stored parameters as f32.

    ```mlir
    %x = kvq.dequantize %code, %scale, %zero
           : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    ```
  }];
  let arguments = (ins I32:$code, F32:$scale, F32:$zero, KVQ_QuantAttr:$scheme);
  let results = (outs F32:$result);
  let assemblyFormat = "$code `,` $scale `,` $zero `:` $scheme attr-dict";
}

def KVQ_UnpackOp : KVQ_Op<"unpack", [Pure]> {
  let summary = "Extracts a vector of b-bit codes from packed words";
  let description = [{
    `words` is a little-endian bit stream of packed codes (bit i of the
    stream is bit i % 32 of word i / 32). Lane j of the result is the
    `bits`-bit code at bit `offset + j * stride`, zero-extended to i32.
    Consecutive codes of one group use `stride = bits`; the same code of
    consecutive groups uses the groups' bit distance. Positions are
    attributes, so each target expands the op into its own shifts and
    permutes (kvq-expand-unpack).

    ```mlir
    %codes = kvq.unpack %words {bits = 2, offset = 32, stride = 2}
               : vector<2xi32> -> vector<16xi32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32]>:$words,
                   ConfinedAttr<I32Attr, [IntMinValue<1>, IntMaxValue<8>]>:$bits,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$offset,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$stride);
  let results = (outs VectorOfRankAndType<[1], [I32]>:$codes);
  let assemblyFormat = "$words attr-dict `:` type($words) `->` type($codes)";
  let hasVerifier = 1;
}

def KVQ_GroupDotOp : KVQ_Op<"group_dot", [Pure, AttrSizedOperandSegments]> {
  let summary = "Dots of tiles with one quantized group, its parameters folded";
  let description = [{
    Dot `r` is the dot of `tiles[r]` with the group whose stored codes are
    `codes`, each element reconstructed as `slope * c + offset` (the affine
    form of a group's stored parameters, docs/Numerics.md):
    `slope * sum_k tiles[r][k] * codes[k] + offset * sums[r]`, where
    `sums[r]` must be the sum of tile r's elements (a form may use either
    side of that identity). The products are summed in any order and with
    fused multiply-adds. Each target lowers it by its forms
    (kvq-expand-group-dots): where a thread's vectors are registers of
    lanes, the loop summing a row's groups carries the products with the
    reconstructed group as vectors and reduces them once after it;
    elsewhere each dot is summed on its own, the parameters applied once
    after it.

    ```mlir
    %d0, %d1 = kvq.group_dot %codes slope %s offset %o tiles(%q0, %q1)
                 sums(%s0, %s1)
                 : vector<32xi32>, vector<32xf32>, vector<32xf32> -> f32, f32
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32]>:$codes, F32:$slope,
                   F32:$offset,
                   Variadic<VectorOfRankAndType<[1], [F32]>>:$tiles,
                   Variadic<F32>:$sums);
  let results = (outs Variadic<F32>:$dots);
  let assemblyFormat = [{
    $codes `slope` $slope `offset` $offset `tiles` `(` $tiles `)`
    `sums` `(` $sums `)` attr-dict `:` type($codes) `,` type($tiles) `->`
    type($dots)
  }];
  let hasVerifier = 1;
}

def KVQ_PackOp : KVQ_Op<"pack", [Pure]> {
  let summary = "Packs a vector of b-bit codes into words";
  let description = [{
    The inverse of a `kvq.unpack` of consecutive codes: lane j of `codes`
    (below 2^bits) goes to bit `j * bits` of a little-endian bit stream (bit
    i of the stream is bit i % 32 of word i / 32), and the result is the
    stream's words, the bits after the last code zero. Each target expands
    it into its own permutes and shifts (kvq-expand-pack).

    ```mlir
    %words = kvq.pack %codes {bits = 2} : vector<16xi32> -> vector<1xi32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32]>:$codes,
                   ConfinedAttr<I32Attr, [IntMinValue<1>, IntMaxValue<8>]>:$bits);
  let results = (outs VectorOfRankAndType<[1], [I32]>:$words);
  let assemblyFormat = "$codes attr-dict `:` type($codes) `->` type($words)";
  let hasVerifier = 1;
}

def KVQ_HadamardOp : KVQ_Op<"hadamard", [RecursiveMemoryEffects,
                                         SingleBlock]> {
  let summary = "Rotates rows by a Hadamard rotation into a buffer";
  let description = [{
    The buffer's rows of `dim` (a power of two) f32 channels become R x
    (R^T x with `inverse`), R = H S / sqrt(dim) as docs/Numerics.md
    ("Hadamard rotation") specifies: the signs S of `seed` (none: every
    sign +1), the fast Walsh-Hadamard transform's log2(dim) stages of fp32
    adds and subtracts in the reference's order, the scale 1/sqrt(dim)
    rounded once. Every element of the buffer is a row's, and every thread
    of a block sees the rotated rows after it. Each target expands it into
    its own form (kvq-expand-hadamard).

    x is the buffer's rows as they are, or, given an `input` region, the
    values it yields: channel `c` (index) of row `row` is what the region
    yields for them, evaluated once for each element (its other effects,
    such as a flag raised on a non-finite value, happen then), so that the
    rows are read where they are without a copy first.

    ```mlir
    kvq.hadamard %rows dim 128 seed 7 : memref<1024xf32, #gpu.address_space<workgroup>>
    kvq.hadamard %rows dim 128 input(%row, %c) {
      %x = memref.load %tokens[%row, %c] : memref<8x128xf32>
      kvq.yield %x : f32
    } : memref<1024xf32>
    ```
  }];
  let arguments = (ins
      Arg<MemRefRankOf<[F32], [1]>, "the rows", [MemRead, MemWrite]>:$rows,
      ConfinedAttr<I64Attr, [IntPositive]>:$dim,
      OptionalAttr<I64Attr>:$seed, UnitAttr:$inverse);
  let regions = (region AnyRegion:$input);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The input region's block: (row, channel) as indices; null without
    /// one.
    ::mlir::Block *getInputBlock() {
      return getInput().empty() ? nullptr : &getInput().front();
    }
  }];
}

def KVQ_YieldOp : KVQ_Op<"yield", [Pure, Terminator,
                                   HasParent<"HadamardOp">]> {
  let summary = "Yields an element of a kvq.hadamard's input";
  let arguments = (ins F32:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // KVQ_DIALECT_KVQ_KVQOPS_TD
