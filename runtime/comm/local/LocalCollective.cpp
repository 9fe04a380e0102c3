//===- LocalCollective.cpp - the single-rank collective -------------------===//
//
// With one rank every collective is a copy (or nothing): the reference that
// the MPI and NCCL collectives must agree with.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Collective.h"

#include <cstring>

namespace moe::rt {

namespace {

class LocalCollective final : public Collective {
public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

protected:
  Status doAllReduce(Stream &, DeviceArray) override { return Status::ok(); }
  Status doAllGather(Stream &stream, DeviceArray in, DeviceArray out) override {
    return stream.enqueueHost([=] {
      if (in.count) // empty arrays may have no memory at all
        std::memmove(out.data, in.data, in.count * dtypeSize(in.dtype));
      return Status::ok();
    });
  }
  Status doAllToAllV(Stream &stream, DeviceArray send, const std::vector<size_t> &sendCounts,
                     DeviceArray recv, std::vector<size_t> &recvCounts) override {
    return stream.enqueueHost([=, &sendCounts, &recvCounts] {
      if (std::string why = sendOverflow(sendCounts, send); !why.empty())
        return Status::error(why);
      if (sendCounts[0] > recv.count)
        return Status::error("all_to_all_v: " + std::to_string(sendCounts[0]) +
                             " elements arrive; the receive buffer holds " +
                             std::to_string(recv.count));
      recvCounts = sendCounts;
      if (sendCounts[0])
        std::memmove(recv.data, send.data, sendCounts[0] * dtypeSize(send.dtype));
      return Status::ok();
    });
  }
};

} // namespace

std::unique_ptr<Collective> createLocalCollective() {
  return std::make_unique<LocalCollective>();
}

} // namespace moe::rt
