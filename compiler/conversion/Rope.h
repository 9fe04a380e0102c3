//===- Rope.h - rotary embedding tables resolved at compile time -*- C++ -*-===//
//
// The compiler turns rope_theta and rope_scaling into inverse frequencies and
// a cos/sin factor, so the runtime needs no knowledge of scaling schemes.
// Formulas follow transformers' modeling_rope_utils (computed in float32
// where it does).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_CONVERSION_ROPE_H
#define MOE_COMPILER_CONVERSION_ROPE_H

#include "mlir/IR/BuiltinAttributes.h"

#include <string>
#include <vector>

namespace moe {

struct RopeTable {
  std::vector<float> invFreq; ///< rotaryDim / 2 entries
  float attentionFactor = 1.0f;
};

/// Inverse frequencies for `rotaryDim` rotated dimensions. `scaling` is the
/// config's rope_scaling (null: none); supported: default, linear, yarn.
/// `maxPositions` is max_position_embeddings (YaRN's fallback for
/// original_max_position_embeddings). On an unsupported or malformed scaling
/// returns false and sets `error`.
bool computeRope(int64_t rotaryDim, double theta, mlir::DictionaryAttr scaling,
                 int64_t maxPositions, RopeTable &table, std::string &error);

} // namespace moe

#endif
