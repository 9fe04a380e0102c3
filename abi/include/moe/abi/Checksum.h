//===- Checksum.h - the weight checksum ------------------------*- C++ -*-===//
#ifndef MOE_RUNTIME_CHECKSUM_H
#define MOE_RUNTIME_CHECKSUM_H

#include <cstddef>
#include <cstdint>

namespace moe::rt {

/// A 64-bit checksum, computed 8 bytes at a time so that verifying a
/// multi-GiB weight file runs at memory speed. Streamable: feed chunks whose
/// sizes are multiples of 8 (only the last may be shorter) to update().
class Checksum64 {
public:
  void update(const void *data, size_t bytes);
  uint64_t value() const;

private:
  uint64_t state_ = 0x9e3779b97f4a7c15ull;
  uint64_t length_ = 0;
};

uint64_t checksum64(const void *data, size_t bytes);

} // namespace moe::rt

#endif
