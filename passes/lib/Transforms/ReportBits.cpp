//===- ReportBits.cpp - print equivalent bits and exact bytes -------------===//

#include "kvq/Analysis/BitAccounting.h"
#include "kvq/Transforms/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace kvq {
#define GEN_PASS_DEF_KVQREPORTBITS
#include "kvq/Transforms/Passes.h.inc"
} // namespace kvq

using namespace mlir;
using namespace kvq;

namespace {

struct KVQReportBitsPass : kvq::impl::KVQReportBitsBase<KVQReportBitsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (CacheOp cache : getOperation().getOps<CacheOp>()) {
      if (failed(cache.verifyTablesPresent()))
        return signalPassFailure();
      FailureOr<SequenceBytes> bytes =
          computeSequenceBytesOrError(cache, tokens);
      if (failed(bytes))
        return signalPassFailure();
      report(cache, *bytes, llvm::outs());
    }
    markAllAnalysesPreserved();
  }

  void report(CacheOp cache, const SequenceBytes &bytes, raw_ostream &os) {
    EquivalentBits bits = computeEquivalentBits(cache);
    ModelAttr model = cache.getModel();
    // In double: the element count of a sequence whose bytes fit in 64 bits
    // may itself not.
    double elements = 2.0 * double(tokens) * model.getLayers() *
                      model.getKvHeads() * model.getHeadDim();
    os << "kvq.cache @" << cache.getSymName() << "\n";
    os << "  code-bits = " << llvm::format("%g", bits.codeBits) << "\n";
    os << "  storage-bits = " << llvm::format("%g", bits.storageBits) << "\n";
    os << "  bytes(tokens = " << tokens << ") = " << bytes.getTotal() << "\n";
    os << "    codes = " << bytes.codes << "\n";
    os << "    params = " << bytes.params << "\n";
    os << "    full-precision = " << bytes.fullPrecision << "\n";
    os << "    pools = " << bytes.pools << "\n";
    os << "    metadata = " << bytes.metadata << "\n";
    if (elements > 0)
      os << "  bits(tokens = " << tokens << ") = "
         << llvm::format("%.4f", 8.0 * double(bytes.getTotal()) / elements)
         << "\n";
  }
};

} // namespace
