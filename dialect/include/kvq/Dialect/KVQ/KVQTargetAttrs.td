//===- KVQTargetAttrs.td - targets, units and forms --------*- tablegen -*-===//
//
// What the kernels are compiled for, as data: `#kvq.target` with the units
// of its hardware, and the forms kvq-select-forms picks from them for each
// kernel. Included by KVQAttrs.td.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_DIALECT_KVQ_KVQTARGETATTRS_TD
#define KVQ_DIALECT_KVQ_KVQTARGETATTRS_TD

include "kvq/Dialect/KVQ/KVQInterfaces.td"

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

class KVQ_UnitAttr<string name, string attrMnemonic>
    : KVQ_Attr<name, attrMnemonic, [KVQ_ComputeUnitAttrInterface]> {
  let parameters = (ins
    "unsigned":$m,
    "unsigned":$n,
    "unsigned":$k,
    "::mlir::Type":$operands,
    "::mlir::Type":$accumulator);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def KVQ_MatrixUnitAttr : KVQ_UnitAttr<"MatrixUnit", "mma"> {
  let summary = "A warp's matrix multiply-accumulate";
  let description = [{
    One instruction of a whole warp: PTX's `mma.sync.aligned.m16n8k16` with
    f16 operands and f32 sums, which every chip from sm_80 runs, is

    ```mlir
    #kvq.mma<m = 16, n = 8, k = 16, operands = f16, accumulator = f32>
    ```
  }];
}

def KVQ_DotUnitAttr : KVQ_UnitAttr<"DotUnit", "dot"> {
  let summary = "A vector register's dot products";
  let description = [{
    One instruction on one vector register: each of its `m` lanes adds `k`
    products of narrow integers to a wider sum (`n` = 1). AVX-512 VNNI's
    `vpdpwssd` (pairs of i16 into 16 i32 lanes) is

    ```mlir
    #kvq.dot<m = 16, n = 1, k = 2, operands = i16, accumulator = i32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Target
//===----------------------------------------------------------------------===//

def KVQ_TargetAttr : KVQ_Attr<"Target", "target"> {
  let summary = "What the kernels of a cache are compiled for";
  let description = [{
    Attached to each `kvq.cache` as `kvq.target` by `kvq-assign-target`; the
    layout (split size), the form selection, the GPU kernels (warp size,
    block threads), the host code (CPU) and the manifest read it, so each
    fact has one definition.
    `host_cpu` is `native` or an LLVM CPU name; `chips` the GPUs PTX is
    emitted for; `split_tokens` the most tokens one attention block of the
    GPU kernels covers and `host_split_tokens` one of the host CPU's
    (flash-decoding split; the runtime plans each batch's split size up to
    the capacity of the backend it runs on; 2048 where a spec states a
    target without it); `vector_lanes` the f32 lanes of the host CPU's
    vector registers, which the CPU kernels' vector forms compute on (16
    with AVX-512, 8 with AVX; kvq-assign-target reads them off the CPU,
    16 where a spec states a target without them).

    The units: `cpu_dot`, a `#kvq.dot` the host CPU runs on one vector
    register (kvq-assign-target reads AVX-512 VNNI's `vpdpwssd` off the
    CPU); `gpu_matrix`, a `#kvq.mma` every chip runs (kvq-assign-target
    gives the chips' common one: m16n8k16 from sm_80). A spec that states a
    target states its units; one it leaves out is one the kernels do not
    use.

    ```mlir
    #kvq.target<host_cpu = "native", chips = ["sm_80", "sm_90"],
                warp_size = 32, block_threads = 128, split_tokens = 512,
                vector_lanes = 16,
                gpu_matrix = #kvq.mma<m = 16, n = 8, k = 16, operands = f16,
                                      accumulator = f32>>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"host CPU">:$host_cpu,
    "::mlir::ArrayAttr":$chips,
    "unsigned":$warp_size,
    "unsigned":$block_threads,
    "unsigned":$split_tokens,
    DefaultValuedParameter<"unsigned", "::kvq::kDefaultHostSplitTokens">:
      $host_split_tokens,
    DefaultValuedParameter<"unsigned", "16">:$vector_lanes,
    OptionalParameter<"::kvq::DotUnitAttr">:$cpu_dot,
    OptionalParameter<"::kvq::MatrixUnitAttr">:$gpu_matrix);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the attribute on a kvq.cache.
    static ::llvm::StringRef getAttrName() { return "kvq.target"; }
    /// kvq's defaults (kDefaultChips, 32-thread warps, 128-thread blocks,
    /// 512-token splits, the chips' matrix unit) for `hostCpu` and `chips`
    /// (the default chips if empty) and the host's `vectorLanes` and dot
    /// unit `cpuDot` (null: none).
    static TargetAttr getDefault(::mlir::MLIRContext *ctx,
                                 ::llvm::StringRef hostCpu = "native",
                                 ::llvm::ArrayRef<std::string> chips = {},
                                 unsigned vectorLanes = 16,
                                 DotUnitAttr cpuDot = {});
    /// The matrix unit every chip of `chips` runs with warps of `warpSize`
    /// threads, or null.
    static MatrixUnitAttr getCommonMatrixUnit(::mlir::MLIRContext *ctx,
                                              ::mlir::ArrayAttr chips,
                                              unsigned warpSize);
    /// The chip names.
    ::llvm::SmallVector<std::string> getChipNames() const;
    /// The chip the GPU kernels' PTX is emitted for: the oldest of `chips`.
    /// The kernels are one program for every chip (their forms use only
    /// the units all chips share), and the driver compiles a chip's PTX for
    /// any newer one, so its PTX serves them all.
    ::std::string getPtxChip() const;
  }];
}

//===----------------------------------------------------------------------===//
// Forms
//===----------------------------------------------------------------------===//

def KVQ_KeyForm : I32EnumAttr<"KeyForm",
    "how an attend kernel scores the keys of its pages", [
    I32EnumAttrCase<"Rows", 0, "rows">,
    I32EnumAttrCase<"TokenBlocks", 1, "token_blocks">,
    I32EnumAttrCase<"TokenBlocksI16", 2, "token_blocks_i16">,
    I32EnumAttrCase<"TokenBlocksMatrix", 3, "token_blocks_matrix">,
    I32EnumAttrCase<"ChannelGroups", 4, "channel_groups">,
    I32EnumAttrCase<"ChannelGroupsI16", 5, "channel_groups_i16">,
    I32EnumAttrCase<"ChannelGroupsMatrix", 6, "channel_groups_matrix">,
    I32EnumAttrCase<"Reordered", 7, "reordered">,
    I32EnumAttrCase<"PreRope", 8, "pre_rope">]> {
  let cppNamespace = "::kvq";
}

def KVQ_ValueForm : I32EnumAttr<"ValueForm",
    "how an attend kernel sums the values of its pages", [
    I32EnumAttrCase<"Rows", 0, "rows">,
    I32EnumAttrCase<"TokenBlocks", 1, "token_blocks">,
    I32EnumAttrCase<"TokenBlocksI16", 2, "token_blocks_i16">,
    I32EnumAttrCase<"TokenBlocksMatrix", 3, "token_blocks_matrix">,
    I32EnumAttrCase<"ChannelGroups", 4, "channel_groups">,
    I32EnumAttrCase<"ChannelGroupsI16", 5, "channel_groups_i16">,
    I32EnumAttrCase<"ChannelGroupsMatrix", 6, "channel_groups_matrix">,
    I32EnumAttrCase<"Reordered", 7, "reordered">]> {
  let cppNamespace = "::kvq";
}

def KVQ_AttendFormsAttr : KVQ_Attr<"AttendForms", "attend_forms"> {
  let summary = "The forms of an attend kernel on one target";
  let description = [{
    Set by `kvq-select-forms` on each `kvq.attend_kernel`, once for the
    host CPU and once for the GPU: the form that scores the keys of the
    quantized pages and the one that sums their values (docs/Rationale.md,
    "Forms"). `rows` reads full-precision pages; `token_blocks` and
    `channel_groups` are the vector forms of span = tokens and span =
    channels groups, `_i16` their 16-bit integer forms on a `#kvq.dot` of
    i16 pairs, `_matrix` their forms on a `#kvq.mma` m16n8k16; `reordered`
    (channel reorder) and `pre_rope` (keys rotated per token) go token by
    token.

    ```mlir
    #kvq.attend_forms<keys = token_blocks_matrix, values = channel_groups_matrix>
    ```
  }];
  let parameters = (ins
    EnumParameter<KVQ_KeyForm>:$keys,
    EnumParameter<KVQ_ValueForm>:$values);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // KVQ_DIALECT_KVQ_KVQTARGETATTRS_TD
