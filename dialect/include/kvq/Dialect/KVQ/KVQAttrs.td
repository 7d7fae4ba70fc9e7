//===- KVQAttrs.td - kvq scheme attributes -----------------*- tablegen -*-===//
//
// The attributes a kvq.cache is declared with. Vocabulary (one word per
// concept across papers, see docs/Rationale.md):
//   group   values that share one scale (and zero-point),
//   span    the axis a group runs along: `tokens` (one channel across G
//           consecutive tokens, KIVI's "per-channel") or `channels` (one
//           token across G consecutive channels, KIVI's "per-token"),
//   sink    leading tokens kept in full precision forever,
//   window  the newest tokens, kept in full precision,
//   flush   moving the oldest `flush` window tokens into the quantized region,
//   pool    OTT's full-precision outlier-token buffers.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_DIALECT_KVQ_KVQATTRS_TD
#define KVQ_DIALECT_KVQ_KVQATTRS_TD

include "kvq/Dialect/KVQ/KVQDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def KVQ_Span : I32EnumAttr<"Span", "axis a quantization group runs along", [
    I32EnumAttrCase<"Tokens", 0, "tokens">,
    I32EnumAttrCase<"Channels", 1, "channels">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

def KVQ_Mode : I32EnumAttr<"Mode", "quantizer mode", [
    I32EnumAttrCase<"Asym", 0, "asym">,
    I32EnumAttrCase<"Sym", 1, "sym">,
    I32EnumAttrCase<"Hybrid", 2, "hybrid">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

def KVQ_RopeStyle : I32EnumAttr<"RopeStyle", "rotary embedding layout", [
    I32EnumAttrCase<"Half", 0, "half">,
    I32EnumAttrCase<"Interleaved", 1, "interleaved">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

// `channel_order` of #kvq.model: how a head's channels pair under RoPE in
// the keys and queries the cache is given, the order every channel group,
// reorder and clip table of the spec refers to.
def KVQ_ChannelOrder : I32EnumAttr<"ChannelOrder",
    "order of a head's rotary channel pairs", [
    I32EnumAttrCase<"Any", 0, "any">,
    I32EnumAttrCase<"Half", 1, "half">,
    I32EnumAttrCase<"Interleaved", 2, "interleaved">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

def KVQ_RopeScalingKind : I32EnumAttr<"RopeScalingKind",
    "rotary frequency scaling", [
    I32EnumAttrCase<"Linear", 0, "linear">,
    I32EnumAttrCase<"Llama3", 1, "llama3">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

def KVQ_TensorKind : I32EnumAttr<"TensorKind", "keys or values", [
    I32EnumAttrCase<"Keys", 0, "keys">,
    I32EnumAttrCase<"Values", 1, "values">]> {
  let cppNamespace = "::kvq";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class KVQ_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<KVQ_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def KVQ_ModelAttr : KVQ_Attr<"Model", "model"> {
  let summary = "Shape of the attention layers a cache serves";
  let description = [{
    `heads` query heads share `kv_heads` key/value heads (MHA when equal, MQA
    when `kv_heads = 1`, GQA otherwise). `dtype` is the element type of
    full-precision keys and values. `scale` is the softmax scale, by default
    `1/sqrt(head_dim)`. `channel_order` states the order of each head's
    channels in the keys and queries the cache is given: `half` pairs
    channel `i` with `i + head_dim/2` under RoPE (Hugging Face's Llama
    layout), `interleaved` pairs `2i` with `2i + 1` (Meta's and GGUF's).
    Scores do not depend on it, channel groups do: a spec calibrated in one
    order (SKVQ's reorder and clip tables) states it, and an engine hands
    the cache keys in that order. Absent (`any`), the spec holds for
    either. A pre-RoPE key scheme's rotation style must agree with it.

    ```mlir
    #kvq.model<layers = 32, heads = 32, kv_heads = 8, head_dim = 128, dtype = f16>
    #kvq.model<layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16,
               channel_order = interleaved>
    ```
  }];
  let parameters = (ins
    "unsigned":$layers,
    "unsigned":$heads,
    "unsigned":$kv_heads,
    "unsigned":$head_dim,
    "::mlir::Type":$dtype,
    OptionalParameter<"::mlir::FloatAttr">:$scale,
    DefaultValuedParameter<"::kvq::ChannelOrder", "::kvq::ChannelOrder::Any",
      "order of a head's rotary channel pairs">:$channel_order);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "unsigned":$layers, "unsigned":$heads,
                     "unsigned":$kv_heads, "unsigned":$head_dim,
                     "::mlir::Type":$dtype, "::mlir::FloatAttr":$scale), [{
      return $_get($_ctxt, layers, heads, kv_heads, head_dim, dtype, scale,
                   ::kvq::ChannelOrder::Any);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The softmax scale: the declared one, or 1/sqrt(head_dim).
    double getSoftmaxScale() const;
    /// Query heads served by each kv-head.
    unsigned getGroupRatio() const { return getHeads() / getKvHeads(); }
  }];
}

def KVQ_RopeScalingAttr : KVQ_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "Frequency scaling of a rotary embedding";
  let description = [{
    `linear` (position interpolation) divides every inverse frequency by
    `factor`. `llama3` (Llama 3.1) divides the low frequencies (wavelength
    above `original_max_position / low_freq_factor`) by `factor`, keeps the
    high ones (wavelength below `original_max_position / high_freq_factor`)
    and interpolates between the two in between (docs/Numerics.md,
    "Pre-RoPE keys").

    ```mlir
    #kvq.rope_scaling<kind = linear, factor = 4.0>
    #kvq.rope_scaling<kind = llama3, factor = 8.0, low_freq_factor = 1.0,
                      high_freq_factor = 4.0, original_max_position = 8192>
    ```
  }];
  let parameters = (ins
    EnumParameter<KVQ_RopeScalingKind>:$kind,
    "::mlir::FloatAttr":$factor,
    OptionalParameter<"::mlir::FloatAttr">:$low_freq_factor,
    OptionalParameter<"::mlir::FloatAttr">:$high_freq_factor,
    DefaultValuedParameter<"unsigned", "0">:$original_max_position);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def KVQ_RopeAttr : KVQ_Attr<"Rope", "rope"> {
  let summary = "Rotary embedding applied by the attention kernel";
  let description = [{
    Keys are cached before RoPE and the attention kernel rotates each
    dequantized key by its position (SKVQ's `pre_rope`, KVQuant). The first
    `dims` channels rotate in pairs: `half` pairs channel `i` with
    `i + dims/2` (NeoX, Llama), `interleaved` pairs `2i` with `2i + 1`
    (GPT-J); pair `i` turns by `position * theta^(-2i/dims)`, its frequency
    optionally rescaled by `scaling` (docs/Numerics.md, "Pre-RoPE keys").

    ```mlir
    #kvq.rope<theta = 1.000000e+04 : f64, dims = 128, style = half>
    #kvq.rope<theta = 5.000000e+05 : f64, dims = 128, style = half,
              scaling = #kvq.rope_scaling<kind = linear, factor = 4.0>>
    ```
  }];
  let parameters = (ins
    "::mlir::FloatAttr":$theta,
    "unsigned":$dims,
    EnumParameter<KVQ_RopeStyle>:$style,
    OptionalParameter<"::kvq::RopeScalingAttr">:$scaling);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::FloatAttr":$theta, "unsigned":$dims,
                     "::kvq::RopeStyle":$style), [{
      return $_get($_ctxt, theta, dims, style, RopeScalingAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The inverse frequency of each of the `dims / 2` rotated pairs, in
    /// fp64, scaling applied.
    ::llvm::SmallVector<double> getInverseFrequencies() const;
  }];
}

def KVQ_ReorderAttr : KVQ_Attr<"Reorder", "reorder"> {
  let summary = "Channel permutation with variable group sizes (SKVQ)";
  let description = [{
    Channels of each (layer, kv-head) are permuted before grouping:
    `perm[l][h][i]` is the original channel placed at position `i`. After the
    permutation, groups take `sizes[l][h][g]` consecutive channels; there are
    `head_dim / group` groups per token, so the average size is the nominal
    group size. Both tables are `i32` elements attributes of shapes
    `layers x kv_heads x head_dim` and `layers x kv_heads x groups`; large
    tables belong in `dense_resource` blobs at the end of the spec.
  }];
  let parameters = (ins
    "::mlir::ElementsAttr":$perm,
    "::mlir::ElementsAttr":$sizes);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// The permutation table, flattened; fails if it is not integral or its
    /// resource blob is missing.
    ::mlir::FailureOr<::llvm::SmallVector<int64_t>> readPerm() const;
    /// The group size table, flattened.
    ::mlir::FailureOr<::llvm::SmallVector<int64_t>> readSizes() const;
  }];
}

// A value that is either given (`key = value`) or left out; absent is
// `std::nullopt`, so no value of the type stands for "not given".
class KVQ_OptionalValueParameter<string type, string desc = "">
    : OptionalParameter<"std::optional<" # type # ">", desc> {
  let parser = "::kvq::parsePresentValue<" # type # ">($_parser)";
  let printer = "$_printer << *$_self";
}

// An f64 value written as a decimal or an exact small fraction `n/d`
// (XQuant's eta = 1/6).
class KVQ_RationalParameter<string desc = "">
    : OptionalParameter<"::mlir::FloatAttr", desc> {
  let parser = "::kvq::parseRational($_parser)";
  let printer = "::kvq::printRational($_printer, $_self.getValueAsDouble())";
}

// SKVQ's clipping: an f64 factor for the layer, written as a decimal or a
// fraction `n/d`, or an elements attribute of one factor per group.
class KVQ_ClipParameter<string desc = "">
    : OptionalParameter<"::mlir::Attribute", desc> {
  let parser = "::kvq::parseClip($_parser)";
  let printer = "::kvq::printClip($_printer, $_self)";
}

// A kvq attribute nested in a struct, printed with its `#kvq.` prefix (the
// struct directive would strip it); either spelling parses.
class KVQ_NestedAttrParameter<string type, string desc = "">
    : OptionalParameter<type, desc> {
  let printer = "$_printer.printAttribute($_self)";
}

// `rotate` of #kvq.quant: an orthonormal rotation of each token's head_dim
// channels before quantization (docs/Numerics.md, "Hadamard rotation").
def KVQ_Rotation : I32EnumAttr<"Rotation",
    "rotation of a token's channels before quantization", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Hadamard", 1, "hadamard">]> {
  let cppNamespace = "::kvq";
  let genSpecializedAttr = 0;
}

def KVQ_QuantAttr : KVQ_Attr<"Quant", "quant"> {
  let summary = "How one tensor (keys or values) of a layer is quantized";
  let description = [{
    ```mlir
    #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
    #kvq.quant<bits = 2, mode = asym, span = channels, group = 128,
               params = f8E4M3FN, levels = 3, clip = 0.92>
    #kvq.quant<bits = 3, mode = sym, span = channels, group = 32,
               key_norm = true>
    ```
    Keys are `key = value` pairs in any order. Required: `bits` (1-8), `mode`
    (`asym`, `sym`, `hybrid`), `span` (`tokens`, `channels`) and `group` (the
    group size G). Optional: `params`, the dtype of stored scales and
    zero-points (`f16` by default; `f32`, `bf16`, `f8E4M3FN`); `levels`, fewer
    code levels than `2^bits` (SKVQ's ternary codes: `levels = 3`); `eta`,
    XQuant's data-free calibration in (0, 0.5), a decimal or a fraction
    `n/d`; `clip`, SKVQ's clipping factor, one float (or fraction) for the
    layer or an `f32` elements attribute of shape
    `layers x kv_heads x (head_dim / group)` for one factor per group;
    `reorder`, a `#kvq.reorder`; `key_norm = true`, InnerQ's per-channel key
    normalisation; `pre_rope`, a `#kvq.rope`; `rotate = hadamard`, a
    Walsh-Hadamard rotation of each token's channels before quantization
    (the query rotated alike for keys, the attention output rotated back for
    values), with `rotate_seed = n` for a random-sign Hadamard (signs drawn
    from the seed, applied before the transform). An optional key left out
    is absent: plain asym without `eta`, `2^bits` levels without `levels`,
    no clipping without `clip`, no rotation without `rotate`.
  }];
  let parameters = (ins
    "unsigned":$bits,
    EnumParameter<KVQ_Mode>:$mode,
    EnumParameter<KVQ_Span>:$span,
    "unsigned":$group,
    DefaultValuedParameter<"::mlir::Type", "::mlir::Float16Type::get($_ctxt)",
      "dtype of the stored scales and zero-points">:$params,
    KVQ_OptionalValueParameter<"unsigned", "code levels, if fewer than 2^bits">:
      $levels,
    KVQ_RationalParameter<"XQuant's eta">:$eta,
    KVQ_ClipParameter<"a clipping factor or a table of them">:$clip,
    KVQ_NestedAttrParameter<"::kvq::ReorderAttr">:$reorder,
    DefaultValuedParameter<"bool", "false">:$key_norm,
    KVQ_NestedAttrParameter<"::kvq::RopeAttr">:$pre_rope,
    DefaultValuedParameter<"::kvq::Rotation", "::kvq::Rotation::None",
      "rotation of each token's channels before quantization">:$rotate,
    KVQ_OptionalValueParameter<"unsigned", "seed of a random-sign rotation">:
      $rotate_seed);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "unsigned":$bits, "::kvq::Mode":$mode,
                     "::kvq::Span":$span, "unsigned":$group,
                     "::mlir::Type":$params,
                     "std::optional<unsigned>":$levels,
                     "::mlir::FloatAttr":$eta, "::mlir::Attribute":$clip,
                     "::kvq::ReorderAttr":$reorder, "bool":$key_norm,
                     "::kvq::RopeAttr":$pre_rope), [{
      return $_get($_ctxt, bits, mode, span, group, params, levels, eta, clip,
                   reorder, key_norm, pre_rope, ::kvq::Rotation::None,
                   std::nullopt);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether channels are rotated before quantization.
    bool isRotated() const { return getRotate() != ::kvq::Rotation::None; }
    /// Code levels actually used: `levels`, or 2^bits when not given.
    unsigned getNumLevels() const;
    /// Stored parameters per group: scale, plus a zero-point unless sym.
    unsigned getParamsPerGroup() const;
    /// Bits of one stored parameter.
    unsigned getParamBits() const;
    /// Bits one group of `size` codes occupies, in whole 32-bit words.
    uint64_t getGroupCodeBits(uint64_t size) const;
    /// XQuant's eta, if given (plain asym otherwise).
    std::optional<double> getEtaValue() const {
      if (::mlir::FloatAttr eta = getEta())
        return eta.getValueAsDouble();
      return std::nullopt;
    }
    /// The per-layer clipping factor, if clipping is one constant.
    std::optional<double> getUniformClip() const;
    /// The per-group clipping table, if clipping is one factor per group.
    ::mlir::ElementsAttr getClipTable() const;
    /// The per-group clipping table, flattened; fails if `clip` is not a
    /// floating-point elements attribute with its data available.
    ::mlir::FailureOr<::llvm::SmallVector<double>> readClipTable() const;
  }];
}

def KVQ_FullPrecisionAttr : KVQ_Attr<"FullPrecision", "full_precision"> {
  let summary = "A tensor kept unquantized, in the model dtype";
  let description = [{
    The baseline (`specs/fp16.mlir`): every token of the tensor is stored in
    the model's `dtype`.
  }];
}

def KVQ_WindowAttr : KVQ_Attr<"Window", "window"> {
  let summary = "Full-precision regions of the token axis and the flush unit";
  let description = [{
    The first `sink` tokens of a sequence stay in full precision forever. New
    tokens join the recent window; after every append, while the window holds
    at least `recent + flush` tokens, its oldest `flush` tokens are quantized.
    Attention therefore always sees between `recent` and `recent + flush - 1`
    full-precision recent tokens.

    ```mlir
    #kvq.window<sink = 32, recent = 96, flush = 1>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"unsigned", "0">:$sink,
    "unsigned":$recent,
    "unsigned":$flush);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def KVQ_PoolAttr : KVQ_Attr<"Pool", "pool"> {
  let summary = "OTT outlier-token pools";
  let description = [{
    Per (layer, kv-head), the `capacity` tokens with the smallest key L1 norm
    among each flushing group and the pool are kept in full precision; tokens
    dropping out of the pool move to an `extra` full-precision pool; tracking
    stops once that is full. Layers below `first_layer` are not tracked.

    ```mlir
    #kvq.pool<capacity = 3, extra = 32, first_layer = 2>
    ```
  }];
  let parameters = (ins
    "unsigned":$capacity,
    "unsigned":$extra,
    DefaultValuedParameter<"unsigned", "0">:$first_layer);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def KVQ_ShareAttr : KVQ_Attr<"Share", "share"> {
  let summary = "Cross-layer code sharing (XQuant)";
  let description = [{
    Layers form groups of `group` consecutive layers, aligned at multiples of
    `group`. Every layer `l >= from` that is not its group's member `owner`
    stores only its own scale and zero-point and reconstructs with the codes
    of the owner layer. XQuant's `km`/`vm` is `from`; its layer pairs are
    `group = 2, owner = 0`.

    ```mlir
    #kvq.share<from = 16>
    #kvq.share<from = 0, group = 3, owner = 1>
    ```
  }];
  let parameters = (ins
    "unsigned":$from,
    DefaultValuedParameter<"unsigned", "2">:$group,
    DefaultValuedParameter<"unsigned", "0">:$owner);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The layer whose codes `layer` reconstructs with, if it shares.
    std::optional<unsigned> getCodeOwner(unsigned layer) const;
  }];
}

//===----------------------------------------------------------------------===//
// Physical layout (computed by kvq-assign-layout)
//===----------------------------------------------------------------------===//

def KVQ_SliceLayoutAttr : KVQ_Attr<"SliceLayout", "slice_layout"> {
  let summary = "Where one layer's (layer, kv-head) slices live in a page";
  let description = [{
    Slice `(l, h)` starts at byte `offset + h * slice_bytes` of a page
    (docs/KernelABI.md, "Page layout"). Quantized schemes place their codes
    at 0 (`codes_bytes`, none when the layer reuses layer `codes_from`'s),
    `groups_per_page` scales of `param_bytes` at `scales_offset` and, unless
    sym (`zeros_offset = -1`), as many zero-points at `zeros_offset`. A
    sharing layer finds the owner's codes for kv-head `h` at
    `codes_layer_delta + h * codes_head_delta` bytes from its own slice.
    With channel reorder (variable group sizes) a token's codes take
    `words_per_token` words and group `g` of kv-head `h` starts at word
    `group_words[h * groups_per_token + g]` of them (`words_per_group` is
    then 0). Zero, -1 and empty fields are elided. The parameters are the
    fields of `kvq::abi::SliceLayout` (kvq/ABI/CacheLayout.h), in order:
    the one description of a slice that the runtime reads too.

    ```mlir
    #kvq.slice_layout<offset = 0, slice_bytes = 6144, words_per_group = 2,
                      groups_per_page = 512, param_bytes = 2,
                      codes_bytes = 4096, scales_offset = 4096,
                      zeros_offset = 5120>
    ```
  }];
  let parameters = (ins
    "uint64_t":$offset,
    "uint64_t":$slice_bytes,
    DefaultValuedParameter<"unsigned", "0">:$words_per_group,
    DefaultValuedParameter<"unsigned", "0">:$groups_per_token,
    DefaultValuedParameter<"unsigned", "0">:$groups_per_page,
    DefaultValuedParameter<"unsigned", "0">:$param_bytes,
    DefaultValuedParameter<"uint64_t", "0">:$codes_bytes,
    DefaultValuedParameter<"uint64_t", "0">:$scales_offset,
    DefaultValuedParameter<"int64_t", "-1">:$zeros_offset,
    DefaultValuedParameter<"int64_t", "-1">:$codes_from,
    DefaultValuedParameter<"int64_t", "0">:$codes_layer_delta,
    DefaultValuedParameter<"int64_t", "0">:$codes_head_delta,
    DefaultValuedParameter<"unsigned", "0">:$words_per_token,
    OptionalParameter<"::mlir::DenseI32ArrayAttr">:$group_words);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "const ::kvq::abi::SliceLayout &":$layout)>
  ];
  let extraClassDeclaration = [{
    /// The numbers this attribute spells.
    ::kvq::abi::SliceLayout getLayout() const;
  }];
}

def KVQ_TensorLayoutAttr : KVQ_Attr<"TensorLayout", "tensor_layout"> {
  let summary = "The page layout of keys or values";
  let description = [{
    A page of `page_bytes` bytes holds every layer's slices, one
    `#kvq.slice_layout` per layer; the full-precision window holds
    `window_capacity` (recent + flush - 1) tokens.
  }];
  let parameters = (ins
    "unsigned":$window_capacity,
    "uint64_t":$page_bytes,
    "::mlir::ArrayAttr":$slices);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    SliceLayoutAttr getSlice(unsigned layer) const {
      return ::mlir::cast<SliceLayoutAttr>(getSlices()[layer]);
    }
  }];
}

def KVQ_PoolLayoutAttr : KVQ_Attr<"PoolLayout", "pool_layout"> {
  let summary = "Where a cache keeps its OTT outlier pools";
  let description = [{
    Layers `first_layer` and up are tracked. Per tracked layer, sequence slot
    and kv-head: `entries` = capacity + extra full-precision key and value
    rows (the pool's slots, then the extra pool's, in buffers laid out as
    `[layer][slot][entries][kv_heads][head_dim]` of the model dtype) and
    `index_words` u32 of bookkeeping (`[layer][slot][kv_heads][index_words]`:
    pool count, extra count, stopped, 0, then each entry's position);
    docs/KernelABI.md, "Outlier pools".

    ```mlir
    #kvq.pool_layout<capacity = 3, extra = 32, first_layer = 2, entries = 35,
                     index_words = 39>
    ```
  }];
  let parameters = (ins
    "unsigned":$capacity,
    "unsigned":$extra,
    "unsigned":$first_layer,
    "unsigned":$entries,
    "unsigned":$index_words);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Words of an index before the entries' positions.
    static constexpr unsigned kHeaderWords = ::kvq::abi::kPoolHeaderWords;
    bool isTracked(unsigned layer) const { return layer >= getFirstLayer(); }
  }];
}

def KVQ_LayoutAttr : KVQ_Attr<"Layout", "layout"> {
  let summary = "The physical layout of a compiled cache";
  let description = [{
    Computed once by `kvq-assign-layout` and attached to each `kvq.cache` as
    `kvq.layout`; the kernels and the manifest read it. `page_tokens` tokens
    per page, `split_tokens` at most per attention block of the GPU kernels
    and `host_split_tokens` of the host CPU's (flash-decoding split: the
    capacity of a block's score buffer; the target's), `split_granule` the
    step of the split sizes the runtime may plan (it divides both
    capacities and is a whole number of every token-spanning group, so a
    split starts on a group), `dtype_bytes` per full-precision element,
    and the OTT pools (`pool`, a `#kvq.pool_layout`) when the cache has
    them.

    ```mlir
    #kvq.layout<page_tokens = 128, split_tokens = 512, split_granule = 32,
                dtype_bytes = 2,
                keys = #kvq.tensor_layout<...>, values = #kvq.tensor_layout<...>>
    ```
  }];
  let parameters = (ins
    "unsigned":$page_tokens,
    "unsigned":$split_tokens,
    DefaultValuedParameter<"unsigned", "::kvq::kDefaultHostSplitTokens">:
      $host_split_tokens,
    "unsigned":$split_granule,
    "unsigned":$dtype_bytes,
    "TensorLayoutAttr":$keys,
    "TensorLayoutAttr":$values,
    OptionalParameter<"PoolLayoutAttr">:$pool);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the attribute on a kvq.cache.
    static ::llvm::StringRef getAttrName() { return "kvq.layout"; }
  }];
}

include "kvq/Dialect/KVQ/KVQTargetAttrs.td"

#endif // KVQ_DIALECT_KVQ_KVQATTRS_TD
