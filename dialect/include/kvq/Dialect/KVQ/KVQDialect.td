//===- KVQDialect.td - kvq dialect definition --------------*- tablegen -*-===//
//
// The kvq dialect declares KV-cache quantization schemes.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_DIALECT_KVQ_KVQDIALECT_TD
#define KVQ_DIALECT_KVQ_KVQDIALECT_TD

include "mlir/IR/OpBase.td"

def KVQ_Dialect : Dialect {
  let name = "kvq";
  let summary = "Declarative KV-cache quantization schemes";
  let description = [{
    A `kvq.cache` declares a whole quantized KV cache: the model shape, the key
    and value schemes (bit-width, grouping span and size, mode, calibration),
    the full-precision windows, the outlier pool, the per-layer schedule and
    cross-layer code sharing. The arithmetic every scheme computes is fixed by
    `docs/Numerics.md`; the vocabulary is explained in `docs/Rationale.md`.
  }];
  let cppNamespace = "::kvq";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class KVQ_Op<string mnemonic, list<Trait> traits = []>
    : Op<KVQ_Dialect, mnemonic, traits>;

#endif // KVQ_DIALECT_KVQ_KVQDIALECT_TD
