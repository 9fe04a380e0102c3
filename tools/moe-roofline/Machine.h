//===- Machine.h - this machine's memory and matmul ceilings ----*- C++ -*-===//
#ifndef MOE_TOOLS_MOEROOFLINE_MACHINE_H
#define MOE_TOOLS_MOEROOFLINE_MACHINE_H

#include "kernels/cpu/Kernels.h"

#include <cstddef>
#include <string>

namespace moe::roofline {

/// STREAM triad a[i] = b[i] + s * c[i] over three arrays of `elements`
/// floats on all OpenMP threads; best of `repeats`, in GB/s counting 12
/// bytes per element (STREAM's convention).
double triadGBps(size_t elements, int repeats);

/// One read of 3 x `elements` floats (the triad's memory) on all OpenMP
/// threads; best of `repeats`, in GB/s. A decode only reads its weights,
/// and reads alone can be slower than the triad's mix: 38 against 61 GB/s
/// on a 2-core Zen 5 VM (docs/performance.md).
double readGBps(size_t elements, int repeats);

struct MatmulPeak {
  double gflops = 0;
  std::string how; ///< what was measured
};

/// f32 C = A B^T at m = n = k = `size` through oneDNN's sgemm when built
/// with it (best of 5), else through our own linear kernel (best of 3).
MatmulPeak matmulPeak(int64_t size);

/// GFLOP/s of our linear kernel (x [tokens, k] times w [n, k] of `type`).
double linearGflops(cpu::WeightType type, int64_t tokens, int64_t n, int64_t k);

} // namespace moe::roofline

#endif
