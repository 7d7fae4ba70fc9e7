//===- Forms.h - the forms of a kernel on a target --------------*- C++ -*-===//
//
// A form is one way to compute a loop of a kernel (score the keys of a
// page, sum its values) on one kind of hardware unit. kvq-select-forms picks
// each kernel's forms from the layout and the target's units and records
// them on the kernel op; the emitters read the record and decide nothing
// (docs/Rationale.md, "Forms").
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_FORMS_H
#define KVQ_CODEGEN_FORMS_H

#include "kvq/Codegen/KernelBuilder.h"
#include "kvq/Codegen/Layout.h"

namespace kvq {

/// The forms of the attend kernel of layer `layer` of `layout` on a backend
/// `info` describes: for keys and for values, the first form of
/// docs/Rationale.md's "Forms" table whose needs the slice and the target
/// meet.
AttendFormsAttr selectAttendForms(const CacheLayout &layout, unsigned layer,
                                  const TargetInfo &info,
                                  mlir::MLIRContext *ctx);

} // namespace kvq

#endif // KVQ_CODEGEN_FORMS_H
