//===- LocalCollective.cpp - the single-rank collective -------------------===//
//
// With one rank every collective is a copy (or nothing): the reference that
// the MPI and NCCL collectives must agree with.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Hal.h"

#include <algorithm>

namespace moe::rt {

namespace {

class LocalCollective final : public Collective {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allReduceSum(float *, size_t) override { return Status::ok(); }
  Status allGather(const float *in, size_t count, float *out) override {
    std::copy(in, in + count, out);
    return Status::ok();
  }
  Status allToAllV(const float *send, const std::vector<size_t> &sendCounts,
                   float *recv, const std::vector<size_t> &recvCounts) override {
    if (sendCounts.size() != 1 || recvCounts.size() != 1 ||
        sendCounts[0] != recvCounts[0])
      return Status::error("local collective: one rank sends to itself only; got " +
                           std::to_string(sendCounts.size()) + " send counts");
    std::copy(send, send + sendCounts[0], recv);
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<Collective> createLocalCollective() {
  return std::make_unique<LocalCollective>();
}

} // namespace moe::rt
