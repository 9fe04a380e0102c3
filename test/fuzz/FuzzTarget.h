//===- FuzzTarget.h - helpers shared by the fuzz targets --------*- C++ -*-===//
//
// Each target defines LLVMFuzzerTestOneInput. Built with clang and
// -fsanitize=fuzzer by `make fuzz` (tools/fuzz.sh), or with ReplayMain.cpp
// into a replay tool that `make test` runs over the seed and regression
// inputs (test/fuzz/replay.test).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_FUZZ_FUZZTARGET_H
#define MOE_TEST_FUZZ_FUZZTARGET_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::fuzz {

/// A directory of this process, created on first use (removed at exit).
const std::string &scratchDir();
/// Writes `size` bytes to `path` (replacing it).
void writeFile(const std::string &path, const void *data, size_t size);

} // namespace moe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
