//===- MoveBF16AsBits.cpp - bf16 memory accesses as i16 -------------------===//
//
// A host without bf16 registers (x86 without AVX512-BF16) keeps bf16 values
// in f32 registers: LLVM widens a loaded bf16 and rounds it back for a
// store, through a soft-float helper (`__truncsfbf2`) that Debian 12's
// libgcc does not have. Loads and stores move the bits instead; the
// arithmetic on bf16 values (their widening to f32, which LLVM does with a
// shift, and arith-expand's rounding) is unchanged.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kvq {
#define GEN_PASS_DEF_KVQMOVEBF16ASBITS
#include "kvq/Codegen/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

/// The i16 type of `type`'s bits where it is bf16 or a vector of bf16; null
/// otherwise.
static Type getBitsType(Type type) {
  auto i16 = IntegerType::get(type.getContext(), 16);
  if (type.isBF16())
    return i16;
  if (auto vector = dyn_cast<VectorType>(type);
      vector && vector.getElementType().isBF16())
    return vector.clone(i16);
  return {};
}

/// `load` reads the bits of its bf16 value, which a bitcast gives its users.
static void loadBits(LLVM::LoadOp load) {
  Type type = load.getType();
  Type bits = getBitsType(type);
  if (!bits)
    return;
  OpBuilder b(load->getContext());
  b.setInsertionPointAfter(load);
  load.getResult().setType(bits);
  auto value = LLVM::BitcastOp::create(b, load.getLoc(), type, load);
  load.getResult().replaceAllUsesExcept(value, value);
}

/// `store` writes the bits of its bf16 value.
static void storeBits(LLVM::StoreOp store) {
  Type bits = getBitsType(store.getValue().getType());
  if (!bits)
    return;
  OpBuilder b(store);
  store.getValueMutable().assign(
      LLVM::BitcastOp::create(b, store.getLoc(), bits, store.getValue()));
}

namespace {

struct KVQMoveBF16AsBitsPass
    : kvq::impl::KVQMoveBF16AsBitsBase<KVQMoveBF16AsBitsPass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      if (auto load = dyn_cast<LLVM::LoadOp>(op))
        loadBits(load);
      else if (auto store = dyn_cast<LLVM::StoreOp>(op))
        storeBits(store);
    });
  }
};

} // namespace
