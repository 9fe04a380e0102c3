//===- Checksum.cpp - the weight checksum --------------------------------===//
#include "moe/abi/Checksum.h"

#include <cstring>

namespace moe::rt {

namespace {
uint64_t mix(uint64_t h, uint64_t word) {
  h ^= word * 0xbf58476d1ce4e5b9ull;
  h = (h << 31) | (h >> 33);
  return h * 0x94d049bb133111ebull;
}
} // namespace

void Checksum64::update(const void *data, size_t bytes) {
  const auto *p = static_cast<const unsigned char *>(data);
  size_t words = bytes / 8;
  uint64_t h = state_;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    h = mix(h, w);
  }
  if (size_t tail = bytes % 8) {
    uint64_t w = 0;
    std::memcpy(&w, p + 8 * words, tail);
    h = mix(h, w ^ (uint64_t(tail) << 56));
  }
  state_ = h;
  length_ += bytes;
}

uint64_t Checksum64::value() const { return mix(state_, length_); }

uint64_t checksum64(const void *data, size_t bytes) {
  Checksum64 c;
  c.update(data, bytes);
  return c.value();
}

} // namespace moe::rt
