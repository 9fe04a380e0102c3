//===- moe-opt.cpp - mlir-opt for the moe project -------------------------===//
//
// Parses, verifies, transforms and prints moe/plan IR. Every dialect and
// implemented pass of the project is registered here, plus MLIR's generic
// transforms (canonicalize, cse, ...), so the usual mlir-opt flags work.
// Its flags are MLIR's (llvm::cl, as every *-opt tool's); --version prints
// the project's version and commit like every other tool, and the input
// and output files go through the same checks as every other tool's.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "moe/runtime/File.h"
#include "moe/runtime/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  moe::registerAllPasses();
  mlir::registerTransformsPasses();
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "moe-opt " << moe::rt::version() << " (commit " << moe::rt::gitCommit()
       << "; MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "moe optimizer: MoE dialects and passes\n", registry);
  // A directory, FIFO or unreadable file is one line here, never a hang in
  // MLIR's reader (which would wait on a FIFO for a writer).
  auto fail = [](const std::string &message) {
    llvm::errs() << "moe-opt: error: " << message << "\n";
    return 1;
  };
  if (input != "-")
    if (auto in = moe::rt::InputFile::open(input); !in)
      return fail(in.status().message());
  if (output != "-")
    if (auto out = moe::rt::OutputFile::create(output); !out)
      return fail(out.status().message());
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));
}
