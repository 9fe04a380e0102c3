//===- WeightEncoding.h - convert checkpoint rows to plan storage -*- C++ -*-===//
//
// The conversions moe-compile applies while packing a weight whose plan
// precision differs from the checkpoint's (moe-assign-precision): f32/bf16/
// f16 rows in, f32, bf16 (round to nearest even), symmetric int8/int4 or fp8
// e4m3 (blocks of rows) with f32 scales out. Deterministic: the same rows
// give the same bytes. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TARGET_WEIGHTENCODING_H
#define MOE_COMPILER_TARGET_WEIGHTENCODING_H

#include "compiler/import/Safetensors.h" // canDecode, decodeElements
#include "moe/abi/PlanFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe {

/// How a weight is stored in the plan.
struct Encoding {
  plan::DType dtype = plan::DType::F32; ///< F32, BF16, I8, I4 or F8E4M3
  int64_t cols = 0;                     ///< row length (the last dimension)
  int64_t group = 0;                    ///< scaled: elements per scale along a row
  int64_t rowGroup = 1;                 ///< scaled: rows per scale (F8E4M3: = group)
  /// F32/BF16/F16 only: rows written in panels of rt::kPanelRows rows,
  /// element c of each row side by side (rt::panelIndex; plan Layout.Panels8).
  bool panels = false;
  bool quantized() const {
    return dtype == plan::DType::I8 || dtype == plan::DType::I4 || dtype == plan::DType::F8E4M3;
  }
  /// Bytes of `rows` encoded rows.
  uint64_t bytes(uint64_t rows) const;
  /// Scales per row (I8/I4).
  int64_t groups() const { return (cols + group - 1) / group; }
};

/// Appends `rows` rows of f32 values encoded as `e` to `out`, and for scaled
/// types each block's scale (max |v| / 127, 7 or 448; q = round(v / scale),
/// fp8 rounded to nearest even) to `scales`, block rows first. `rows` is a
/// multiple of e.rowGroup except in a weight's last call.
void encodeRows(const Encoding &e, const float *src, int64_t rows, std::vector<char> &out,
                std::vector<float> &scales);

} // namespace moe

#endif
