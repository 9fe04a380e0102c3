//===- LinkEmulation.cpp - a slower link for the collectives --------------===//
#include "moe/runtime/LinkEmulation.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace moe::rt {

double LinkModel::seconds(uint64_t wireBytes) const {
  return latencyUs * 1e-6 + double(wireBytes) / (gbPerSecond * 1e9);
}

Expected<LinkModel> LinkModel::parse(const std::string &text) {
  const size_t colon = text.find(':');
  auto number = [](const std::string &s, double &v) {
    char *end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);
  };
  LinkModel link;
  if (colon == std::string::npos || !number(text.substr(0, colon), link.latencyUs) ||
      !number(text.substr(colon + 1), link.gbPerSecond) || link.latencyUs < 0 ||
      link.gbPerSecond <= 0)
    return Status::error("link \"" + text +
                         "\": expected LATENCY_US:GB_PER_S, a latency >= 0 in microseconds "
                         "and a bandwidth > 0 in GB/s, e.g. 50:2");
  return link;
}

std::string LinkModel::describe() const {
  char text[96];
  std::snprintf(text, sizeof text, "%g us + bytes / %g GB/s", latencyUs, gbPerSecond);
  return text;
}

uint64_t allReduceWireBytes(uint64_t bytes, int ranks) {
  return ranks > 1 ? 2 * (uint64_t(ranks) - 1) * bytes / uint64_t(ranks) : 0;
}

uint64_t allGatherWireBytes(uint64_t bytes, int ranks) {
  return ranks > 1 ? (uint64_t(ranks) - 1) * bytes : 0;
}

namespace {

class EmulatedLink final : public Collective {
public:
  EmulatedLink(std::unique_ptr<Collective> inner, const LinkModel &link)
      : owned_(std::move(inner)), inner_(*owned_), link_(link) {}
  /// Over `inner`, which another collective owns (a group of it).
  EmulatedLink(Collective &inner, const LinkModel &link) : inner_(inner), link_(link) {}
  std::string name() const override { return inner_.name() + " over an emulated link"; }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void abandon() override { inner_.abandon(); }
  bool movesDeviceMemory() const override { return inner_.movesDeviceMemory(); }
  std::chrono::nanoseconds timeInCollectives() const override {
    return inner_.timeInCollectives();
  }

protected:
  Status doAllReduce(Stream &stream, DeviceArray data) override {
    if (Status st = inner_.allReduce(stream, data); !st)
      return st;
    return hold(stream, allReduceWireBytes(data.count * dtypeSize(data.dtype), size()));
  }
  Status doAllGather(Stream &stream, DeviceArray in, DeviceArray out) override {
    if (Status st = inner_.allGather(stream, in, out); !st)
      return st;
    return hold(stream, allGatherWireBytes(in.count * dtypeSize(in.dtype), size()));
  }
  Status doAllToAllV(Stream &stream, DeviceArray send, const std::vector<size_t> &sendCounts,
                     DeviceArray recv, std::vector<size_t> &recvCounts) override {
    if (Status st = inner_.allToAllV(stream, send, sendCounts, recv, recvCounts); !st)
      return st;
    // The counts are known when the stream gets here (Collective.h).
    const size_t element = dtypeSize(send.dtype);
    const int self = rank();
    return stream.enqueueHost([this, &sendCounts, element, self] {
      uint64_t bytes = 0;
      for (size_t r = 0; r < sendCounts.size(); ++r)
        if (int(r) != self)
          bytes += sendCounts[r] * element;
      wait(bytes);
      return Status::ok();
    });
  }

  /// The inner collective's group, over the same link.
  Expected<std::unique_ptr<Collective>> makeGroup(const std::vector<int> &members) override {
    auto inner = inner_.group(members);
    if (!inner)
      return inner.status();
    return std::unique_ptr<Collective>(std::make_unique<EmulatedLink>(**inner, link_));
  }

private:
  Status hold(Stream &stream, uint64_t wireBytes) {
    return stream.enqueueHost([this, wireBytes] {
      wait(wireBytes);
      return Status::ok();
    });
  }
  void wait(uint64_t wireBytes) const {
    std::this_thread::sleep_for(std::chrono::duration<double>(link_.seconds(wireBytes)));
  }

  std::unique_ptr<Collective> owned_;
  Collective &inner_;
  LinkModel link_;
};

} // namespace

std::unique_ptr<Collective> emulateLink(std::unique_ptr<Collective> inner,
                                        const LinkModel &link) {
  return std::make_unique<EmulatedLink>(std::move(inner), link);
}

} // namespace moe::rt
