//===- ApiKeys.h - who may call the API -------------------------*- C++ -*-===//
//
// --api-key-file: one key per line (blank lines and lines starting with #
// are skipped). A request must carry one as "Authorization: Bearer KEY"
// (the scheme in any case, as RFC 9110 says). Keys are compared in
// constant time: the time taken depends on the keys' lengths only, never
// on how much of a guess was right. A key file that others may read is
// reported (worldReadable), since anyone on the machine could then call
// the API.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_APIKEYS_H
#define MOE_SERVE_APIKEYS_H

#include "moe/abi/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace moe::serve {

class ApiKeys {
public:
  /// The keys in `path`; an error when it cannot be read, holds none, or
  /// a key holds a control character (a NUL would end it early elsewhere).
  static rt::Expected<ApiKeys> load(const std::string &path);
  /// Whether `path` may be read by users other than its owner and group
  /// (the mode's "other" read bit).
  static bool worldReadable(const std::string &path);
  /// Whether an Authorization header's value names a key.
  bool accepts(std::string_view authorization) const;
  size_t size() const { return keys_.size(); }
  /// The first key (a client sends it).
  const std::string &first() const { return keys_.front(); }

private:
  std::vector<std::string> keys_;
};

} // namespace moe::serve

#endif
