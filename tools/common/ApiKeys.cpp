//===- ApiKeys.cpp - who may call the API ---------------------------------===//
#include "tools/common/ApiKeys.h"

#include "moe/runtime/File.h"

#include <sstream>

namespace moe::tools {

rt::Expected<ApiKeys> ApiKeys::load(const std::string &path) {
  auto text = rt::readFile(path, 1u << 20);
  if (!text)
    return text.status();
  ApiKeys keys;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
    if (a == std::string::npos || line[a] == '#')
      continue;
    keys.keys_.push_back(line.substr(a, b - a + 1));
  }
  if (keys.keys_.empty())
    return rt::Status::error(path + ": holds no API key (one per line)");
  return keys;
}

bool ApiKeys::accepts(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer)
    return false;
  std::string_view given = authorization.substr(kBearer.size());
  // Every key is compared to the end, and no comparison stops early.
  unsigned accepted = 0;
  for (const std::string &key : keys_) {
    size_t diff = key.size() ^ given.size();
    for (size_t i = 0; i < key.size(); ++i)
      diff |= uint8_t(key[i]) ^ uint8_t(i < given.size() ? given[i] : 0);
    accepted |= unsigned(diff == 0);
  }
  return accepted != 0;
}

} // namespace moe::tools
