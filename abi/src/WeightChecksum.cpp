//===- WeightChecksum.cpp - a weight's checksum, by its plan's algorithm --===//
#include "moe/abi/WeightChecksum.h"

#define XXH_STATIC_LINKING_ONLY // XXH3_state_t's definition
#include <xxhash.h>

#include <new>

namespace moe::rt {

const char *weightChecksumName(plan::WeightChecksum algorithm) {
  switch (algorithm) {
  case plan::WeightChecksum::Checksum64:
    return "checksum64";
  case plan::WeightChecksum::XXH3_64:
    return "xxh3-64";
  }
  return nullptr;
}

void WeightHasher::FreeXxh3::operator()(XXH3_state_s *state) const { XXH3_freeState(state); }

WeightHasher::WeightHasher(plan::WeightChecksum algorithm) {
  if (algorithm == plan::WeightChecksum::XXH3_64) {
    xxh3_.reset(XXH3_createState());
    if (!xxh3_)
      throw std::bad_alloc();
    XXH3_64bits_reset(xxh3_.get());
  }
}

WeightHasher::~WeightHasher() = default;
WeightHasher::WeightHasher(WeightHasher &&) noexcept = default;
WeightHasher &WeightHasher::operator=(WeightHasher &&) noexcept = default;

void WeightHasher::update(const void *data, size_t bytes) {
  if (xxh3_)
    XXH3_64bits_update(xxh3_.get(), data, bytes);
  else
    checksum64_.update(data, bytes);
}

uint64_t WeightHasher::value() const {
  return xxh3_ ? XXH3_64bits_digest(xxh3_.get()) : checksum64_.value();
}

} // namespace moe::rt
