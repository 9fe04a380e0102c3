//===- moe-opt.cpp - mlir-opt for the moe project -------------------------===//
//
// Parses, verifies, transforms and prints moe/plan IR. Every dialect and
// implemented pass of the project is registered here, plus MLIR's generic
// transforms (canonicalize, cse, ...), so the usual mlir-opt flags work.
// Its flags are MLIR's (llvm::cl, as every *-opt tool's), but it keeps the
// other tools' conventions: --help lists MLIR's and the project's flags
// only (not the hundreds of backend flags libLLVM registers, which stay
// usable and appear under --help-hidden), --version prints the project's
// version and commit, a bad flag is one "moe-opt: error:" line, and the
// input and output go through the runtime's checked file paths (a
// directory, FIFO, unreadable or changing file, or a full disk is one line
// and exit 1).
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "moe/abi/File.h"
#include "moe/abi/Version.h"

#include "mlir/Debug/Counter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>
#include <iterator>
#include <string>

namespace {

int fail(const std::string &message) {
  llvm::errs() << "moe-opt: error: " << message << "\n";
  return 1;
}

/// The input: a regular file through the runtime's checks, or all of
/// standard input for "-".
moe::rt::Expected<std::string> readInput(const std::string &path) {
  if (path != "-")
    return moe::rt::readFile(path);
  return std::string(std::istreambuf_iterator<char>(std::cin), {});
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  moe::registerAllPasses();
  mlir::registerTransformsPasses();
  // What is registered so far is libLLVM's (code generation for every
  // target): hidden from --help, still accepted.
  // (Done inside libLLVM: its options' classes carry no RTTI for UBSan's
  // checks of calls made from here.)
  static llvm::cl::OptionCategory none("moe-opt's own (none)");
  llvm::cl::HideUnrelatedOptions(none);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "moe-opt " << moe::rt::version() << " (commit " << moe::rt::gitCommit()
       << "; MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  // MLIR's own flags, as mlir::registerAndParseCLIOptions registers them.
  static llvm::cl::opt<std::string> input(llvm::cl::Positional, llvm::cl::desc("<input file>"),
                                          llvm::cl::init("-"));
  static llvm::cl::opt<std::string> output("o", llvm::cl::desc("Output filename"),
                                           llvm::cl::value_desc("filename"),
                                           llvm::cl::init("-"));
  mlir::MlirOptMainConfig::registerCLOptions(registry);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  mlir::tracing::DebugCounter::registerCLOptions();
  std::string overview = "moe optimizer: MoE dialects and passes\nAvailable Dialects: ";
  llvm::raw_string_ostream overviewStream(overview);
  llvm::interleaveComma(registry.getDialectNames(), overviewStream);
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  if (!llvm::cl::ParseCommandLineOptions(argc, argv, overview, &errorStream)) {
    std::string first = errors.substr(0, errors.find('\n'));
    if (first.rfind("moe-opt: ", 0) == 0)
      first.erase(0, 9);
    return fail(first);
  }
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) // prints them and exits
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));

  auto text = readInput(input);
  if (!text)
    return fail(text.status().message());
  auto out = moe::rt::OutputFile::create(output);
  if (!out)
    return fail(out.status().message());
  std::string result;
  llvm::raw_string_ostream resultStream(result);
  if (mlir::failed(mlir::MlirOptMain(
          resultStream, llvm::MemoryBuffer::getMemBufferCopy(*text, input), registry, config)))
    return 1;
  if (moe::rt::Status st = out->write(result); !st)
    return fail(st.message());
  if (moe::rt::Status st = out->close(); !st)
    return fail(st.message());
  return 0;
}
