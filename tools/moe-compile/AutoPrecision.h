//===- AutoPrecision.h - moe-compile --precision=auto ------------*- C++ -*-===//
//
// The calibration search behind `--precision=auto`: measure what storing
// each component (router, experts, attention, ...) at each candidate
// precision does to the output distribution (KL against the fp32 plan and
// top-1 agreement, on calibration tokens), then pick the assignment with the
// fewest weight bytes whose predicted KL and top-1 loss stay in the budget,
// and check it by compiling and measuring it; then, at equal bytes, move
// each int4 (int8) component to w4a8 (w8a8), the faster kernels, where the
// measured budget still holds. The result is a list of
// moe-assign-precision overrides (`component=precision`).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOE_COMPILE_AUTOPRECISION_H
#define MOE_TOOLS_MOE_COMPILE_AUTOPRECISION_H

#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

namespace moe {

struct AutoPrecisionOptions {
  double maxKl = 0.0;   ///< mean KL(fp32 || plan) per calibration token, nats
  double minTop1 = 1.0; ///< fraction of calibration tokens whose argmax agrees
  /// Calibration input: a text for byte-level models, comma- or
  /// space-separated token ids for others; empty: a built-in English sample
  /// (byte-level) or seeded random tokens.
  std::string calibrationFile;
  int64_t calibrationTokens = 1024; ///< at most this many are scored
  std::string workDir;              ///< candidate plans go here (removed after)
  int threads = 0;                  ///< kernel threads of the measuring runs (0: all)
};

/// Compiles the checkpoint with moe-assign-precision's `policy` and
/// `overrides` into `dir`; false with `error` set on failure.
using CompileFn = std::function<bool(const std::string &policy,
                                     const std::vector<std::string> &overrides,
                                     const std::string &dir, std::string &error)>;

/// The directory for the candidate plans of a compile to `output`: one per
/// process (concurrent compiles to one -o must not measure each other's
/// candidates), beside it; those of processes that no longer run are
/// removed.
std::string candidatesDir(const std::string &output);

/// Runs the search, printing its measurements to `log`; returns false with
/// `error` set when a compile or a run fails or the budget cannot be met even
/// in fp32.
bool searchPrecision(const CompileFn &compile, const AutoPrecisionOptions &options,
                     std::vector<std::string> &overrides, llvm::raw_ostream &log,
                     std::string &error);

} // namespace moe

#endif
