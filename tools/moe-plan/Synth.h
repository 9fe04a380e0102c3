//===- Synth.h - a runnable copy of a plan with random weights --*- C++ -*-===//
//
// `moe-plan synth`: a machine lent for minutes (the GPU check) has no
// compiler to build the 1.7 GB benchmark model from a checkpoint, and the
// model is too large to send there. Its plan without weights (moe-compile
// --shape-only, a few kilobytes a layer) travels instead, and synth writes
// random weights of every tensor's type and shape beside a copy of it:
// the same bytes to stream, the same kernels, and routing spread over the
// experts as a trained model's is. The outputs are
// meaningless as text.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOE_PLAN_SYNTH_H
#define MOE_TOOLS_MOE_PLAN_SYNTH_H

#include "moe/runtime/Plan.h"
#include "moe/abi/Status.h"

#include <cstdint>
#include <string>

namespace moe::tools {

/// Writes plan directory `out` (which must not exist): the plan of `loaded`
/// (read from its directory) with new weight files of random values, each
/// weight's checksum, `shape_only` cleared and the checkpoint hash replaced
/// by "random-<seed>" (cut or padded with '-' to the hash's length, so that
/// `moe-plan show` tells). Values, so that a product keeps the RMS of its
/// input and routers spread tokens over the experts:
/// - matrices (2 or more dimensions) of f32, bf16 or f16: uniform with RMS
///   1 / sqrt(row length), the embedding table's rows RMS 1;
/// - vectors (norm weights, biases): 1.0;
/// - int8: uniform in [-127, 127]; int4: uniform in [-7, 7]; fp8 e4m3: any
///   code but NaN (all mean 0); their scales the matrix's RMS over the
///   codes' RMS.
rt::Status synthesizeWeights(const rt::LoadedPlan &loaded, const std::string &out,
                             uint64_t seed);

} // namespace moe::tools

#endif
