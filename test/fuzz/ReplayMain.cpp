//===- ReplayMain.cpp - run a fuzz target over saved inputs ---------------===//
//
// `<target>-replay FILE|DIR...` feeds every file to LLVMFuzzerTestOneInput
// once, as libFuzzer would, so that the inputs the fuzzers found (and their
// seeds) are rerun by every `make test` with the ordinary build. Inputs are
// read through the tools' checked reader: a FIFO, an unreadable file or one
// that changes size while read is one line and exit 1, never a hang.
//
//===----------------------------------------------------------------------===//
#include "moe/abi/File.h"
#include "test/fuzz/FuzzTarget.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto &e : fs::recursive_directory_iterator(argv[i]))
        if (!e.is_directory())
          files.push_back(e.path().string());
    } else {
      files.push_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string &f : files) {
    auto bytes = moe::rt::readFile(f);
    if (!bytes) {
      std::fprintf(stderr, "replay: error: %s\n", bytes.status().message().c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes->data()), bytes->size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
