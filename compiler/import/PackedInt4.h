//===- PackedInt4.h - GPTQ layers read as the plan's int4 -------*- C++ -*-===//
//
// A GPTQ checkpoint replaces each quantized `X.weight` [out, in] by
// `X.qweight` (int32 [in / 8, out], eight 4-bit values along `in`, lowest
// bits first), `X.scales` (fp16 [groups, out]), `X.qzeros` (int32
// [groups, out / 8], packed along `out`) and optionally `X.g_idx` (int32
// [in], the group of each input). Symmetric checkpoints whose groups are
// in order map exactly onto the plan's I4: value = scale * (q - 8), with q
// - 8 the plan's two's-complement nibble and the fp16 scale widened to f32.
//
// addPackedInt4Views checks those tensors (shapes, dtypes, every zero point
// 8, groups in order) and puts one view `X.weight` of dtype kPackedInt4 in
// their place, so the importer and the plan writer see one tensor [out, in]
// and nothing is left over. readPackedInt4 then reads a view (or a
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
inline constexpr const char *kPackedInt4 = "GPTQ_I4";

/// What a view reads: the checkpoint tensors, and which rows and columns of
/// the [out, in] matrix it holds (all of them, or a slice).
struct PackedInt4 {
  std::string layer; ///< "X" of X.qweight, for messages
  TensorInfo qweight, scales;
  int64_t rows = 0, cols = 0; ///< out, in of the whole layer
  int64_t group = 0;          ///< inputs per scale
  int64_t row0 = 0, col0 = 0; ///< a slice's first row and column
};

/// The checkpoint's tensors, with every GPTQ layer as one view (above).
/// Throws InputError naming the layer when its tensors disagree, when a zero
/// point is not 8, or when its g_idx is out of order (desc_act).
TensorCatalog openCheckpoint(const std::string &dir, const HfConfig &config);

/// View `view` (shape [rows, cols] after any slice) as plan rows: each row
/// `cols` nibbles, two per byte, low nibble first, appended to `nibbles`;
/// its f32 scales, one per `group` columns, appended to `scales`. Throws
/// InputError when a file cannot be read.
void readPackedInt4(const TensorInfo &view, std::vector<char> &nibbles,
                    std::vector<float> &scales);

/// The view of columns [c0, c0 + nc) of rows [r0, r0 + nr) of `view`: the
/// columns must start and end on group boundaries. Throws InputError.
TensorInfo slicePackedInt4(const TensorInfo &view, int64_t r0, int64_t nr, int64_t c0,
                           int64_t nc);

} // namespace moe

#endif
