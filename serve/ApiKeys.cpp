//===- ApiKeys.cpp - who may call the API ---------------------------------===//
#include "moe/serve/ApiKeys.h"

#include "moe/abi/File.h"

#include <sys/stat.h>

#include <algorithm>
#include <sstream>

namespace moe::serve {

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
    std::string key = line.substr(a, b - a + 1);
    if (std::any_of(key.begin(), key.end(), [](char c) { return uint8_t(c) < 0x20 || c == 0x7f; }))
      return rt::Status::error(path + ": a key holds a control character; keys are printable "
                               "text, one per line");
    keys.keys_.push_back(std::move(key));
  }
  if (keys.keys_.empty())
    return rt::Status::error(path + ": holds no API key (one per line)");
  return keys;
}

bool ApiKeys::worldReadable(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH);
}

bool ApiKeys::accepts(std::string_view authorization) const {
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() < kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                  [](char a, char b) { return a == std::tolower(uint8_t(b)); }))
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

} // namespace moe::serve
