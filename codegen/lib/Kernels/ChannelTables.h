//===- ChannelTables.h - reorder and clip tables in kernels -----*- C++ -*-===//
//
// Private to lib/Kernels. SKVQ's channel reorder (`#kvq.reorder`) and
// per-group clip factors (`clip = dense<...>`) differ per (layer, kv-head):
// a kernel carries the rows of every layer it serves as constant tables in
// its module (so the runtime stays scheme-agnostic) and looks one up by the
// launch's layer (its `tableRow` argument) and the block's kv-head. Where
// the tables live is the kernel's: the target's constant tables for an
// emitted kernel, `memref.global`s for a kernel program.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LIB_KERNELS_CHANNELTABLES_H
#define KVQ_CODEGEN_LIB_KERNELS_CHANNELTABLES_H

#include "kvq/Codegen/Kernels.h"

#include <functional>

namespace kvq {

/// Reads entry `index` (i32) of a kernel's read-only i32 table `name`
/// (unique within the kernel), whose entries `build` gives, placing the
/// table on first use.
using TableLoad = std::function<mlir::Value(
    llvm::StringRef name, mlir::Value index,
    llvm::function_ref<llvm::SmallVector<int32_t>()> build)>;

/// Whether the kernels of `slice` need tables: channel
/// reorder or a per-group clip table.
bool hasChannelTables(const SliceLayout &slice);

/// The tables of one tensor of a kernel's layers for kv-head `head`; each
/// table is emitted on its first lookup. Positions and groups are those
/// after the reorder (docs/KernelABI.md, "Channel reorder").
class ChannelTables {
public:
  /// Tables read by `load`; without it, an emitted kernel's: the target's
  /// constant tables (KernelTarget::getConstantTable), read invariant.
  ChannelTables(KernelBuilder &kb, const CacheLayout &layout,
                const KernelLayers &layers, bool isKeys, mlir::Value head,
                TableLoad load = nullptr);

  bool hasReorder() const { return slice.hasReorder(); }
  bool hasClipTable() const;

  /// The channel at position `position` of a reordered token.
  mlir::Value channelAt(mlir::Value position);
  /// The position of channel `channel` in a reordered token.
  mlir::Value positionOf(mlir::Value channel);
  /// The group of a token holding position `position`.
  mlir::Value groupOf(mlir::Value position);
  /// The first position, size and first code word (in the token's codes)
  /// of group `g` of a token.
  mlir::Value groupStart(mlir::Value g);
  mlir::Value groupSize(mlir::Value g);
  mlir::Value groupWord(mlir::Value g);
  /// The clip factor (f32) of group `g` of a token (span = channels) or of
  /// channel `g` (span = tokens).
  mlir::Value clipFactor(mlir::Value g);

private:
  /// Entry `index` of the (layer, kv-head) row of `rowLength` entries of
  /// table `name`, built by `build` on first use.
  mlir::Value lookup(llvm::StringRef name, unsigned rowLength,
                     mlir::Value index,
                     llvm::function_ref<llvm::SmallVector<int32_t>()> build);
  KernelBuilder &kb;
  TableLoad load;
  const SliceLayout &slice;
  /// The kernel's layers' tables, their rows one after another.
  SliceTables tables;
  llvm::SmallVector<int32_t> groupWords;
  KernelLayers layers;
  unsigned kvHeads;
  unsigned dim, groups;
  llvm::StringRef prefix;
  mlir::Value head;
};

} // namespace kvq

#endif // KVQ_CODEGEN_LIB_KERNELS_CHANNELTABLES_H
