//===- PathCheck.h - Paths the C library would truncate ---------*- C++ -*-===//
//
// Part of kvq. Plain C++17, shared by the runtime and the Python binding.
//
//===----------------------------------------------------------------------===//
//
// A std::string path may hold a NUL byte, which fopen and open(2) take as
// its end: "dir\0/../../etc" would open "dir". Every path the C++ API takes
// and every path the Python binding hands the compiler is checked before
// anything is opened, read or written.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_SUPPORT_PATHCHECK_H
#define KVQ_SUPPORT_PATHCHECK_H

#include "kvq/Support/Status.h"

#include <string>

namespace kvq {

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

} // namespace kvq

#endif // KVQ_SUPPORT_PATHCHECK_H
