//===- ApiKeys.h - who may call the API -------------------------*- C++ -*-===//
//
// --api-key-file: one key per line (blank lines and lines starting with #
// are skipped). A request must carry one as "Authorization: Bearer KEY".
// Keys are compared in constant time: the time taken depends on the keys'
// lengths only, never on how much of a guess was right.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_APIKEYS_H
#define MOE_TOOLS_COMMON_APIKEYS_H

#include "moe/runtime/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace moe::tools {

class ApiKeys {
public:
  /// The keys in `path`; an error when it cannot be read or holds none.
  static rt::Expected<ApiKeys> load(const std::string &path);
  /// Whether an Authorization header's value names a key.
  bool accepts(std::string_view authorization) const;
  size_t size() const { return keys_.size(); }
  /// The first key (a client sends it).
  const std::string &first() const { return keys_.front(); }

private:
  std::vector<std::string> keys_;
};

} // namespace moe::tools

#endif
