//===- Scratch.h - buffers kept between kernel calls ------------*- C++ -*-===//
//
// Kernels' working buffers that outlive the call, grown and never shrunk
// (usually thread_local): allocating, zeroing and faulting them in on every
// call cost more than some of the work they serve (a prefill's expert
// buffers are tens of MB; a decode's GEMV runs in microseconds).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_SCRATCH_H
#define MOE_KERNELS_CPU_SCRATCH_H

#include <cstdint>
#include <vector>

namespace moe::cpu::detail {

/// v's data, grown to at least n elements (new ones value-initialised, the
/// rest kept).
template <class T> T *scratch(std::vector<T> &v, int64_t n) {
  if (int64_t(v.size()) < n)
    v.resize(size_t(n));
  return v.data();
}

} // namespace moe::cpu::detail

#endif
