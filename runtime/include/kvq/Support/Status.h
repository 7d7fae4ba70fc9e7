//===- Status.h - Status and Expected: errors without exceptions -*- C++
//-*-===//
//
// Part of kvq. Plain C++17, shared by the runtime library and the PTX
// interpreter: every fallible call returns a Status or an Expected<T>, so
// that no exception crosses the C API.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_SUPPORT_STATUS_H
#define KVQ_SUPPORT_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace kvq {

/// What kind of failure a Status reports, set where the error is made (the
/// C API's kvq_status mirrors it one to one).
enum class ErrorCode {
  /// A bad argument: null pointer, wrong shape, unknown sequence, layer out
  /// of range, non-finite values, a call out of the documented order.
  InvalidArgument = 1,
  /// No free page or sequence slot left.
  Capacity = 2,
  /// The artifact could not be opened, is malformed, of another version, or
  /// does not match its kernels.
  Artifact = 3,
  /// The backend or device failed (no CUDA driver, a kernel fault).
  Backend = 4,
  /// A host or device allocation failed.
  OutOfMemory = 5,
  /// The artifact needs what this machine lacks (CPU features, a PTX
  /// target).
  Unsupported = 6,
  /// A saved cache file cannot be read or written, or is truncated,
  /// corrupt, of another format version or from another artifact.
  File = 7,
};

/// The outcome of an operation: success, or failure with a code and a
/// message.
class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(ErrorCode Code, std::string Message) {
    Status S;
    S.Code = Code;
    S.Msg = std::move(Message);
    return S;
  }
  bool ok() const { return !Code; }
  /// The failure's code; only meaningful when !ok().
  ErrorCode code() const { return *Code; }
  const std::string &message() const { return Msg; }
  /// The same failure, its message prefixed with what was being done.
  Status withContext(const std::string &Prefix) const {
    return error(*Code, Prefix + Msg);
  }

private:
  std::optional<ErrorCode> Code;
  std::string Msg;
};

/// A value of type T, or the Status explaining why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T Value) : Value(std::move(Value)) {}
  Expected(Status Error) : Err(std::move(Error)) {
    assert(!Err.ok() && "Expected built from a success Status");
  }
  bool ok() const { return Value.has_value(); }
  const Status &status() const { return Err; }
  const std::string &message() const { return Err.message(); }
  T &operator*() { return *Value; }
  const T &operator*() const { return *Value; }
  T *operator->() { return &*Value; }
  const T *operator->() const { return &*Value; }

private:
  std::optional<T> Value;
  Status Err;
};

} // namespace kvq

#endif // KVQ_SUPPORT_STATUS_H
