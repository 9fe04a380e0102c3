//===- ConfigFuzzer.cpp - fuzz the config.json reader and importer --------===//
//
// The input is config.json; the import runs in --shape-only mode (no
// weights), so every field reaches HfConfig's checks and then the IR
// builder and the moe verifier. Errors must come back as an error string.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "compiler/import/Importer.h"
#include "test/fuzz/FuzzTarget.h"

#include "mlir/IR/MLIRContext.h"

using namespace moe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    auto *c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  const std::string &dir = fuzz::scratchDir();
  fuzz::writeFile(dir + "/config.json", data, size);
  ImportOptions options;
  options.shapeOnly = true;
  std::string error;
  auto module = importCheckpoint(*context, dir, options, error);
  (void)module;
  return 0;
}
