//===- KvCache.h - the paged KV cache as the kernels see it -----*- C++ -*-===//
//
// One layer of the paged cache: blocks of `blockSize` token rows; a token's
// row is found through its sequence's block table. Rows are stored as f32,
// bf16, int8 or fp8 e4m3; int8 and fp8 rows carry one f32 scale per head
// (per token and head), so a row of H heads x d elements takes H x (d + 4)
// bytes instead of 4 x H x d.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_KVCACHE_H
#define MOE_KERNELS_CPU_KVCACHE_H

#include <cstdint>

namespace moe::cpu {

enum class KvType : uint8_t { F32, BF16, Int8, Fp8E4M3 };

/// Bytes of one element of a KV row.
int64_t kvElementBytes(KvType type);
/// Whether rows of `type` carry per-head scales.
inline bool kvScaled(KvType type) { return type == KvType::Int8 || type == KvType::Fp8E4M3; }

/// One of the two halves (k or v) of a layer's cache.
struct KvPlane {
  void *data = nullptr;     ///< rows x width elements of `type`
  float *scales = nullptr;  ///< rows x heads (scaled types only)
  int64_t width = 0, heads = 1;
};

struct KvCache {
  KvPlane k, v;
  KvType type = KvType::F32;
  int64_t blockSize = 0;
  /// Row t (tableStride entries): the block table of token t's sequence.
  const int32_t *tables = nullptr;
  int64_t tableStride = 0;

  int64_t row(int64_t token, int64_t position) const {
    return int64_t(tables[token * tableStride + position / blockSize]) * blockSize +
           position % blockSize;
  }
  /// Writes `src` (width floats) as the row of (token, position).
  void store(const KvPlane &plane, int64_t token, int64_t position, const float *src) const;
  /// Positions from `position` to the end of its block: rows that follow
  /// each other in the cache.
  int64_t runLength(int64_t position) const { return blockSize - position % blockSize; }
  /// Head `head` of the `count` rows from (token, position) on (count <=
  /// runLength(position)): row i at data + i * stride. In place for f32
  /// caches (stride plane.width); else dequantised into `scratch` (count x
  /// width / heads floats, stride width / heads), so that the attention
  /// kernels score and weigh a block's rows as one run whatever the type.
  struct Rows {
    const float *data;
    int64_t stride;
  };
  Rows rows(const KvPlane &plane, int64_t token, int64_t position, int64_t head, int64_t count,
            float *scratch) const;
  /// Requests into the cache head `head` of the rows of (token, position)
  /// for positions [first, end), as stored (and their scales): for a
  /// kernel to read them later without waiting on memory.
  void prefetch(const KvPlane &plane, int64_t token, int64_t first, int64_t end,
                int64_t head) const;
};

} // namespace moe::cpu

#endif
