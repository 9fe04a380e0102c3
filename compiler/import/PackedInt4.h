//===- PackedInt4.h - GPTQ and AWQ layers read as plan integers -*- C++ -*-===//
//
// GPTQ and AWQ checkpoints replace each quantized `X.weight` [out, in] by
// packed 4-bit values q in [0, 15] with a zero point z and an fp16 scale s
// per (group of inputs, output): value = s * (q - z).
//
// | tensor      | GPTQ                                  | AWQ ("gemm")                  |
// |-------------|---------------------------------------|-------------------------------|
// | `X.qweight` | int32 [in / 8, out]: 8 q along `in`   | int32 [in, out / 8]: 8 q along `out` |
// | `X.qzeros`  | int32 [groups, out / 8], along `out`  | the same, AWQ's order         |
// | `X.scales`  | fp16 [groups, out]                    | the same                      |
// | `X.g_idx`   | int32 [in], optional: each input's group | none                       |
//
// GPTQ packs values lowest bits first in order; AWQ puts output 8k + m at
// nibble kAwqNibble[m]. GPTQ's v1 format stores z - 1.
//
// Symmetric GPTQ (every z = 8) maps exactly onto the plan's I4: q - 8 is
// the plan's two's-complement nibble. With other zero points the plan
// stores q - z as I8 (in [-16, 15]): exact, at twice int4's bytes, until
// plans hold zero points (docs/design-gptq-awq-import.md). Either way the
// fp16 scales widen exactly to f32.
//
// openCheckpoint checks those tensors (shapes, dtypes, zero points, groups
// in order) and puts one view `X.weight` of dtype kPackedInt4 in their
// place, so the importer and the plan writer see one tensor [out, in] and
// nothing is left over. readPackedInt4 then reads a view (or a
// tensor-parallel slice of one) as plan rows. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_PACKEDINT4_H
#define MOE_COMPILER_IMPORT_PACKEDINT4_H

#include "compiler/import/HfConfig.h"
#include "compiler/import/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe {

/// The TensorInfo dtype of a view: not a safetensors dtype.
inline constexpr const char *kPackedInt4 = "PACKED_I4";

/// What a view reads: the checkpoint tensors, and which rows and columns of
/// the [out, in] matrix it holds (all of them, or a slice).
struct PackedInt4 {
  std::string layer; ///< "X" of X.qweight, for messages
  Int4Format format;
  TensorInfo qweight, scales, qzeros;
  int64_t rows = 0, cols = 0; ///< out, in of the whole layer
  int64_t group = 0;          ///< inputs per scale
  int64_t row0 = 0, col0 = 0; ///< a slice's first row and column
  /// Bytes per plan element: 1 (I8, q - z) or half of one (I4, q - 8).
  bool int8() const { return !format.symmetric; }
};

/// The checkpoint's tensors, with every GPTQ or AWQ layer as one view
/// (above). Throws InputError naming the layer when its tensors disagree,
/// when a symmetric layer has a zero point other than 8, or when its g_idx
/// is out of order (desc_act).
TensorCatalog openCheckpoint(const std::string &dir, const HfConfig &config);

/// View `view` (shape [rows, cols] after any slice) as plan rows: each row
/// `cols` int4 nibbles, two per byte, low nibble first (q - 8), or `cols`
/// int8 bytes (q - z), appended to `out`; its f32 scales, one per `group`
/// columns, appended to `scales`. Throws InputError when a file cannot be
/// read.
void readPackedInt4(const TensorInfo &view, std::vector<char> &out, std::vector<float> &scales);

/// The view of columns [c0, c0 + nc) of rows [r0, r0 + nr) of `view`: the
/// columns must start and end on group boundaries. Throws InputError.
TensorInfo slicePackedInt4(const TensorInfo &view, int64_t r0, int64_t nr, int64_t c0,
                           int64_t nc);

} // namespace moe

#endif
