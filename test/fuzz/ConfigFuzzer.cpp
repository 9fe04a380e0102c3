//===- ConfigFuzzer.cpp - fuzz the config.json reader and importer --------===//
//
// The input is config.json; the import runs in --shape-only mode (no
// weights), so every field reaches HfConfig's checks and then the IR
// builder and the moe verifier. Errors must come back as an error string.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/Importer.h"
#include "test/fuzz/FuzzContext.h"
#include "test/fuzz/FuzzTarget.h"


using namespace moe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = fuzz::scratchDir();
  fuzz::writeFile(dir + "/config.json", data, size);
  ImportOptions options;
  options.shapeOnly = true;
  std::string error;
  auto module = importCheckpoint(fuzz::context(), dir, options, error);
  (void)module;
  return 0;
}
