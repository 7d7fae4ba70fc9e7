//===- KVQInterfaces.td - kvq attribute interfaces ---------*- tablegen -*-===//

#ifndef KVQ_DIALECT_KVQ_KVQINTERFACES_TD
#define KVQ_DIALECT_KVQ_KVQINTERFACES_TD

include "mlir/IR/OpBase.td"

def KVQ_ComputeUnitAttrInterface : AttrInterface<"ComputeUnitAttrInterface"> {
  let cppNamespace = "::kvq";
  let description = [{
    A unit of the hardware that multiplies and accumulates: one instruction
    adds to an `m` x `n` block of `accumulator` sums the products of an
    `m` x `k` and a `k` x `n` block of `operands`. `#kvq.target` lists the
    units its hardware has; each form of `kvq-select-forms` names the unit
    it is written for, and is chosen only where the target has exactly that
    unit.
  }];
  let methods = [
    InterfaceMethod<"Rows of the sums one instruction updates.", "unsigned",
                    "getM">,
    InterfaceMethod<"Columns of the sums one instruction updates.",
                    "unsigned", "getN">,
    InterfaceMethod<"Products added into each sum.", "unsigned", "getK">,
    InterfaceMethod<"The element type of both operands.", "::mlir::Type",
                    "getOperands">,
    InterfaceMethod<"The element type of the sums.", "::mlir::Type",
                    "getAccumulator">,
  ];
}

#endif // KVQ_DIALECT_KVQ_KVQINTERFACES_TD
