//===- KVQAttrs.h - kvq scheme attributes -----------------------*- C++ -*-===//

#ifndef KVQ_DIALECT_KVQ_KVQATTRS_H
#define KVQ_DIALECT_KVQ_KVQATTRS_H

#include "kvq/ABI/CacheLayout.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "kvq/Dialect/KVQ/KVQEnums.h.inc"
#include "kvq/Dialect/KVQ/KVQInterfaces.h.inc"

namespace kvq {
/// The most tokens a window region (sink, recent, flush unit) or an outlier
/// pool may declare (docs/Rationale.md, "Input limits").
constexpr unsigned kMaxWindowTokens = 1u << 20;

/// The most elements a table (clip factors, reorder permutation or group
/// sizes) may hold: far above any model's layers x kv_heads x head_dim, and
/// checked on the table's type before any element is read.
constexpr uint64_t kMaxTableElements = uint64_t(1) << 24;
/// Every region of a page (#kvq.layout) starts on this many bytes
/// (kvq/ABI/CacheLayout.h).
using abi::kLayoutAlignment;
/// The most tokens one attention split of the host CPU's kernels covers
/// unless a target says otherwise: one CPU thread runs a split, so long
/// splits amortise its fixed work (query, softmax, the merge of partial
/// outputs) where the GPU's 512 keep its blocks' score buffers in shared
/// memory (docs/Performance.md, "What bounds the CPU kernels": against 512,
/// 9-14% fewer samples for fp16 and InnerQ-base).
constexpr unsigned kDefaultHostSplitTokens = 2048;
/// The GPUs an artifact carries PTX for unless told otherwise.
inline constexpr const char *kDefaultChips[] = {"sm_80", "sm_90"};
/// True when `table` has more than kMaxTableElements elements.
bool isTableTooLarge(mlir::ElementsAttr table);

/// The values of an integer table: a `dense` attribute or a `dense_resource`
/// blob of i32 or i64. Fails where the data is not available.
mlir::FailureOr<llvm::SmallVector<int64_t>>
readIntegerTable(mlir::ElementsAttr table);
/// The values of a floating-point table (`dense`, or an f32/f64 blob).
mlir::FailureOr<llvm::SmallVector<double>>
readFloatTable(mlir::ElementsAttr table);
} // namespace kvq

#define GET_ATTRDEF_CLASSES
#include "kvq/Dialect/KVQ/KVQAttrs.h.inc"

#endif // KVQ_DIALECT_KVQ_KVQATTRS_H
