//===- NamedRows.h - rows of x named by index, for LinearProblem::xRows -*- C++ -*-===//
#ifndef MOE_TEST_UNIT_KERNELS_NAMEDROWS_H
#define MOE_TEST_UNIT_KERNELS_NAMEDROWS_H

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace moe::cpu {

/// `tokens` rows of x (rows of k floats) picked at random, repeats and all,
/// as LinearProblem::xRows names the routed experts' tokens: their indices
/// and the rows copied out in that order (what a kernel reading them in
/// place must match).
struct NamedRows {
  std::vector<int32_t> index;
  std::vector<float> copied;
};
inline NamedRows nameRows(const std::vector<float> &x, int64_t k, int64_t tokens,
                          std::mt19937 &rng) {
  const int64_t source = int64_t(x.size()) / k;
  NamedRows rows{std::vector<int32_t>(static_cast<size_t>(tokens)),
                 std::vector<float>(static_cast<size_t>(tokens * k))};
  for (int64_t t = 0; t < tokens; ++t) {
    rows.index[size_t(t)] = int32_t(rng() % uint64_t(source));
    std::copy_n(x.data() + rows.index[size_t(t)] * k, k, rows.copied.data() + t * k);
  }
  return rows;
}

} // namespace moe::cpu

#endif
