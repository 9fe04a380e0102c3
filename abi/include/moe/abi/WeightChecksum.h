//===- WeightChecksum.h - a weight's checksum, by its plan's algorithm -*- C++ -*-===//
//
// Every weight of a plan carries a checksum of its bytes (Tensor.checksum),
// computed with the algorithm the plan names (Plan.weight_checksum; absent
// in plans before format 2.10, which read as Checksum64). The writers
// (compiler/target/WeightPacker with kWeightChecksum, `moe-plan synth`) and
// the loader all compute it through WeightHasher, so they cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_WEIGHTCHECKSUM_H
#define MOE_RUNTIME_WEIGHTCHECKSUM_H

#include "moe/abi/Checksum.h"
#include "abi/schema/plan_generated.h"

#include <cstddef>
#include <cstdint>
#include <memory>

struct XXH3_state_s; // xxhash.h's streaming state, kept out of this header

namespace moe::rt {

/// "checksum64", "xxh3-64"; null for a value the schema does not define
/// (the loader refuses such a plan by that value).
const char *weightChecksumName(plan::WeightChecksum algorithm);

/// One weight's checksum, streamed: update() with its bytes in order, in
/// pieces whose sizes are multiples of 8 (only the last may be shorter, as
/// Checksum64 requires), then value(). The algorithm must be one the schema
/// defines (weightChecksumName is not null).
class WeightHasher {
public:
  explicit WeightHasher(plan::WeightChecksum algorithm);
  ~WeightHasher();
  WeightHasher(WeightHasher &&) noexcept;
  WeightHasher &operator=(WeightHasher &&) noexcept;

  void update(const void *data, size_t bytes);
  uint64_t value() const;

private:
  struct FreeXxh3 {
    void operator()(XXH3_state_s *state) const;
  };
  Checksum64 checksum64_;
  std::unique_ptr<XXH3_state_s, FreeXxh3> xxh3_; ///< null for Checksum64
};

} // namespace moe::rt

#endif
