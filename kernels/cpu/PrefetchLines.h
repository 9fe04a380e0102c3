//===- PrefetchLines.h - request a span of memory into the cache -*- C++ -*-===//
#ifndef MOE_KERNELS_CPU_PREFETCHLINES_H
#define MOE_KERNELS_CPU_PREFETCHLINES_H

#include <cstdint>

namespace moe::cpu {

/// Requests the 64-byte lines of [p, p + bytes) into L1, for data a kernel
/// reads soon from places the hardware prefetchers do not follow (rows
/// scattered through a buffer, a row's next chunk).
inline void prefetchLines(const void *p, int64_t bytes) {
  const char *at = static_cast<const char *>(p);
  for (int64_t byte = 0; byte < bytes; byte += 64)
    __builtin_prefetch(at + byte);
}

} // namespace moe::cpu

#endif
