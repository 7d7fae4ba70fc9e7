//===- KVQDialect.cpp - kvq dialect registration --------------------------===//

#include "kvq/Dialect/KVQ/KVQDialect.h"
#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQOps.h"

using namespace mlir;
using namespace kvq;

#include "kvq/Dialect/KVQ/KVQOpsDialect.cpp.inc"

void KVQDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kvq/Dialect/KVQ/KVQOps.cpp.inc"
      >();
  registerAttributes();
}
