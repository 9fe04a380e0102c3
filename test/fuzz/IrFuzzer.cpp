//===- IrFuzzer.cpp - fuzz parsing and verifying moe / plan IR ------------===//
//
// The input is MLIR text: parsed with the moe, plan and func dialects
// registered, then verified (every moe and plan verifier). Diagnostics are
// swallowed; only crashes count.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzContext.h"
#include "test/fuzz/FuzzTarget.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace moe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The MLIR lexer reads up to a terminating NUL, which files read by
  // moe-opt have and libFuzzer's buffers do not: parse a NUL-terminated copy.
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(&fuzz::context(), /*verifyAfterParse=*/false);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (module)
    (void)mlir::verify(*module);
  return 0;
}
