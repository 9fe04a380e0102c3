//===- Status.h - fallible results without exceptions -----------*- C++ -*-===//
//
// Every runtime call that can fail on bad input returns a Status or an
// Expected<T>; nothing aborts. Both are [[nodiscard]]: a failure cannot be
// dropped by accident. Messages are one line that quotes the values.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_STATUS_H
#define MOE_RUNTIME_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace moe::rt {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const { return *message_; }

private:
  Status() = default;
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)), status_(Status::ok()) {}
  Expected(Status status) : status_(std::move(status)) {}
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace moe::rt

#endif
