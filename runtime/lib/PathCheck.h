//===- PathCheck.h - Paths the C library would truncate ---------*- C++ -*-===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// A std::string path may hold a NUL byte, which fopen and open(2) take as
// its end: "dir\0/../../etc" would open "dir". Every path the C++ API takes
// is checked before anything is opened, read or written.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_RUNTIME_LIB_PATHCHECK_H
#define KVQ_RUNTIME_LIB_PATHCHECK_H

#include "kvq/Support/Status.h"

#include <string>

namespace kvq::runtime {

/// Success, or InvalidArgument when Path holds a NUL byte. What names the
/// path in the message: "<What> contains a NUL byte at offset N".
inline Status checkPathHasNoNul(const std::string &Path, const char *What) {
  size_t At = Path.find('\0');
  if (At == std::string::npos)
    return Status::success();
  return Status::error(ErrorCode::InvalidArgument,
                       std::string(What) + " contains a NUL byte at offset " +
                           std::to_string(At));
}

} // namespace kvq::runtime

#endif // KVQ_RUNTIME_LIB_PATHCHECK_H
