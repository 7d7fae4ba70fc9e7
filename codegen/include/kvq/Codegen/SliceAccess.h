//===- SliceAccess.h - addressing pages, slices and codes -------*- C++ -*-===//
//
// The page layout of docs/KernelABI.md as emission helpers, shared by the
// kernels that write pages (flush) and those that read them (attend).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_SLICEACCESS_H
#define KVQ_CODEGEN_SLICEACCESS_H

#include "kvq/Codegen/Layout.h"
#include "kvq/Codegen/Quantizer.h"

namespace kvq {

/// One (layer, kv-head) slice of one page, and the groups in it.
class SliceAccess {
public:
  /// The slice holding quantized position `qpos` of the sequence whose block
  /// table row is `table`, for kv-head `head`.
  SliceAccess(KernelBuilder &kb, const TensorLayout &tensor,
              const SliceLayout &slice, unsigned pageTokens, mlir::Value pages,
              mlir::Value table, mlir::Value qpos, mlir::Value head);

  mlir::Value getBase() const { return base; }
  /// Where this slice's codes start (the owner layer's slice when sharing).
  mlir::Value getCodesBase() const { return codesBase; }

  const SliceLayout &getSlice() const { return slice; }
  QuantAttr getQuant() const { return slice.quant; }
  unsigned getWordsPerGroup() const { return slice.WordsPerGroup; }

  /// Code `k` of group `n` (i32 values).
  mlir::Value loadCode(mlir::Value n, mlir::Value k);
  /// Word `w` of group `n`.
  mlir::Value loadGroupWord(mlir::Value n, unsigned w);
  /// Stores `words` (i32) of group `n`, word `w`.
  void storeWord(mlir::Value n, mlir::Value w, mlir::Value word);
  /// Code `k` of the group whose codes start at word `firstWord` of the
  /// slice's codes, and word `index` of them (variable group sizes).
  mlir::Value loadCodeAt(mlir::Value firstWord, mlir::Value k);
  void storeCodeWord(mlir::Value index, mlir::Value word);
  /// Stored scale / zero-point of group `n` + `after`, as f32 (a constant
  /// `after` folds into the load's address).
  mlir::Value loadScale(Quantizer &quantizer, mlir::Value n,
                        unsigned after = 0);
  mlir::Value loadZero(Quantizer &quantizer, mlir::Value n, unsigned after = 0);
  /// The same as stored (Quantizer::getParamBitsType), for a caller that
  /// converts them later (Quantizer::paramFromBits); the zero-point's is
  /// null where the slice stores none.
  mlir::Value loadScaleBits(Quantizer &quantizer, mlir::Value n,
                            unsigned after = 0);
  mlir::Value loadZeroBits(Quantizer &quantizer, mlir::Value n,
                           unsigned after = 0);
  /// Stored scales / zero-points of groups [n, n + count) as a vector of
  /// f32: one vector load for float parameter dtypes, aligned to its size
  /// (up to kLayoutAlignment) when `alignedN` says n is a multiple of count.
  mlir::Value loadScales(Quantizer &quantizer, mlir::Value n, unsigned count,
                         bool alignedN = false);
  mlir::Value loadZeros(Quantizer &quantizer, mlir::Value n, unsigned count,
                        bool alignedN = false);
  /// Asks for the lines of the stored scales and zero-points of groups
  /// [n, n + count) (KernelTarget::prefetch), n a multiple of count.
  void prefetchParams(mlir::Value n, unsigned count);
  /// Stores raw parameter bits of group `n`.
  void storeScale(mlir::Value n, mlir::Value bits);
  void storeZero(mlir::Value n, mlir::Value bits);

private:
  mlir::Value loadWord(mlir::Value index);
  mlir::Value paramOffset(uint64_t arrayOffset, mlir::Value n);
  mlir::Value loadParams(Quantizer &quantizer, uint64_t arrayOffset,
                         mlir::Value n, unsigned count, bool alignedN);

  KernelBuilder &kb;
  const SliceLayout &slice;
  mlir::Value base;
  /// Where the codes are: this slice, or the owner layer's (sharing).
  mlir::Value codesBase;
};

/// Byte offset, from the start of its layer's pages, of kv-head `head`'s
/// slice of page `page` (the block-table entry, i32): i64.
mlir::Value sliceByteOffset(KernelBuilder &kb, const TensorLayout &tensor,
                            const SliceLayout &slice, mlir::Value page,
                            mlir::Value head);

/// Code `k` (i32) of `bits` bits of the group whose packed words start at
/// word `firstWord` (i32) of a slice's codes, `loadWord(i)` giving word i
/// (a pointer load in the emitted kernels, a memref load in the programs).
mlir::Value loadCodeAt(KernelBuilder &kb, unsigned bits, mlir::Value firstWord,
                       mlir::Value k,
                       llvm::function_ref<mlir::Value(mlir::Value)> loadWord);

/// The `bits`-bit code (i32) at bit `bit` of the little-endian stream of
/// `words` (i32, in registers: kvq.unpack's positions), extracted at a
/// compile-time position.
mlir::Value extractCode(KernelBuilder &kb, llvm::ArrayRef<mlir::Value> words,
                        unsigned bit, unsigned bits);

/// Element offset of (slot, token, head, channel 0) in a `[slots][capacity]
/// [Hkv][D]` full-precision buffer.
mlir::Value fullPrecisionRow(KernelBuilder &kb, ModelAttr model,
                             unsigned capacity, mlir::Value slot,
                             mlir::Value token, mlir::Value head);

/// The ring row of window token `w` (0: the oldest) of a window ring of
/// `capacity` rows whose oldest token is at ring row `head`:
/// (head + w) mod capacity, for head, w < capacity (docs/KernelABI.md,
/// "Window rings").
mlir::Value windowRow(KernelBuilder &kb, unsigned capacity, mlir::Value head,
                      mlir::Value w);

/// Element offset of (slot, window token w, head, channel 0) in a layer's
/// window rings, `[slots][capacity][Hkv][D]`, whose oldest token is at ring
/// row `ringHead`.
mlir::Value windowElement(KernelBuilder &kb, ModelAttr model, unsigned capacity,
                          mlir::Value slot, mlir::Value ringHead, mlir::Value w,
                          mlir::Value head);

/// The tokens a flush (and the track kernel before it) reads in place: the
/// first `ringTokens` are the oldest of one sequence's window ring, the
/// rest lie in order in the linear buffer `input`.
struct FlushSource {
  mlir::Value ring, input, ringHead, ringTokens;
  unsigned capacity;

  /// Flushed token `token` of kv-head `head`: its buffer and the element
  /// offset of its channel 0 there.
  std::pair<mlir::Value, mlir::Value> row(KernelBuilder &kb, ModelAttr model,
                                          mlir::Value token,
                                          mlir::Value head) const;
  /// Whether flushed tokens [token, token + count) are consecutive rows of
  /// one buffer: all in the input, or all in the ring without its wrap.
  mlir::Value isContiguous(KernelBuilder &kb, mlir::Value token,
                           unsigned count) const;
};

} // namespace kvq

#endif // KVQ_CODEGEN_SLICEACCESS_H
