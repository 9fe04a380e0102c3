//===- FuzzTarget.cpp - helpers shared by the fuzz targets ----------------===//
#include "test/fuzz/FuzzTarget.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace moe::fuzz {

const std::string &scratchDir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/moe-fuzz-XXXXXX";
    if (!::mkdtemp(pattern))
      throw std::runtime_error("cannot create a scratch directory in /tmp");
    std::string d = pattern;
    static const std::string removeAtExit = d;
    std::atexit([] { std::filesystem::remove_all(removeAtExit); });
    return d;
  }();
  return dir;
}

void writeFile(const std::string &path, const void *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    throw std::runtime_error(path + ": cannot write");
}

} // namespace moe::fuzz
