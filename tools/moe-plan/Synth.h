//===- Synth.h - a runnable copy of a plan with random weights --*- C++ -*-===//
//
// `moe-plan synth`: a machine lent for minutes (the GPU check) has no
// compiler to build the 1.7 GB benchmark model from a checkpoint, and the
// model is too large to send there. Its plan without weights (moe-compile
// --shape-only, a few kilobytes a layer) travels instead, and synth writes
// random weights of every tensor's type and shape beside a copy of it:
// the same bytes to stream, the same kernels, routing close to uniform, as
// the benchmark checkpoint's own random weights give. The outputs are
// meaningless as text.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOE_PLAN_SYNTH_H
#define MOE_TOOLS_MOE_PLAN_SYNTH_H

#include "moe/runtime/Plan.h"
#include "moe/runtime/Status.h"

#include <cstdint>
#include <string>

namespace moe::tools {

/// Writes plan directory `out` (which must not exist): the plan of `loaded`
/// (read from its directory) with new weight files of random values, each
/// weight's checksum, `shape_only` cleared and the checkpoint hash replaced
/// by "random-<seed>" (cut or padded with '-' to the hash's length, so that
/// `moe-plan show` tells). Values:
/// - matrices (2 or more dimensions) of f32, bf16 or f16: magnitudes
///   log-uniform in [2^-8, 2^-4), random signs;
/// - vectors (norm weights, biases): 1.0;
/// - int8: uniform in [-127, 127]; int4: uniform nibbles; fp8 e4m3: any
///   code but NaN; their scales 2^-4 over the type's largest magnitude.
rt::Status synthesizeWeights(const rt::LoadedPlan &loaded, const std::string &out,
                             uint64_t seed);

} // namespace moe::tools

#endif
