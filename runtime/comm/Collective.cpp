//===- Collective.cpp - argument checks shared by every collective --------===//
#include "moe/runtime/Collective.h"

#include <cstring>
#include <numeric>
#include <sstream>

namespace moe::rt {

namespace {

Status checkArray(const char *op, const char *name, const DeviceArray &a) {
  if (a.dtype != DType::F32 && a.dtype != DType::BF16 &&
      a.dtype != DType::I32)
    return Status::error(std::string(op) + ": " + name + " is " + dtypeName(a.dtype) +
                         "; collectives move F32, BF16 and I32");
  if (!a.data && a.count)
    return Status::error(std::string(op) + ": " + name + " has " + std::to_string(a.count) +
                         " elements but no memory");
  return Status::ok();
}

} // namespace

Status Collective::allReduce(Stream &stream, DeviceArray data) {
  if (Status st = checkArray("all_reduce", "the buffer", data); !st)
    return st;
  return doAllReduce(stream, data);
}

Status Collective::allGather(Stream &stream, DeviceArray in, DeviceArray out) {
  for (auto [name, a] : {std::pair("the input", in), std::pair("the output", out)})
    if (Status st = checkArray("all_gather", name, a); !st)
      return st;
  if (in.dtype != out.dtype || out.count != in.count * size_t(size()))
    return Status::error(std::string("all_gather: the output must hold ") +
                         std::to_string(size()) + " x " + std::to_string(in.count) + " " +
                         dtypeName(in.dtype) + "; it holds " + std::to_string(out.count) + " " +
                         dtypeName(out.dtype));
  return doAllGather(stream, in, out);
}

Status Collective::allToAllV(Stream &stream, DeviceArray send,
                             const std::vector<size_t> &sendCounts, DeviceArray recv,
                             std::vector<size_t> &recvCounts) {
  for (auto [name, a] : {std::pair("the send buffer", send), std::pair("the receive buffer", recv)})
    if (Status st = checkArray("all_to_all_v", name, a); !st)
      return st;
  if (send.dtype != recv.dtype)
    return Status::error(std::string("all_to_all_v: sends ") + dtypeName(send.dtype) +
                         " but receives " + dtypeName(recv.dtype));
  if (sendCounts.size() != size_t(size()))
    return Status::error("all_to_all_v: " + std::to_string(sendCounts.size()) +
                         " send counts for " + std::to_string(size()) + " ranks");
  return doAllToAllV(stream, send, sendCounts, recv, recvCounts);
}

Expected<Collective *> Collective::group(const std::vector<int> &members) {
  bool mine = false;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= size() || (i && members[i] <= members[i - 1]))
      return Status::error("a process group's ranks are ascending, distinct and below " +
                           std::to_string(size()) + "; got rank " + std::to_string(members[i]) +
                           " at position " + std::to_string(i));
    mine |= members[i] == rank();
  }
  if (!mine)
    return Status::error("rank " + std::to_string(rank()) +
                         " asked for a process group it is not in");
  if (int(members.size()) == size())
    return this;
  auto [it, added] = groups_.try_emplace(members);
  if (added) {
    auto made = members.size() == 1 ? Expected<std::unique_ptr<Collective>>(
                                          createLocalCollective())
                                    : makeGroup(members);
    if (!made) {
      groups_.erase(it);
      return made.status();
    }
    it->second = made.take();
  }
  return it->second.get();
}

Expected<std::unique_ptr<Collective>> Collective::makeGroup(const std::vector<int> &) {
  return Status::error("the " + name() + " collective has no process groups");
}

Expected<std::vector<int32_t>> gatherWords(Collective &ranks, Device &device,
                                           const std::vector<int32_t> &mine) {
  const size_t in = mine.size() * 4, out = in * size_t(ranks.size());
  // Gathered in host-visible memory: host collectives (local, MPI) read it
  // on the host, and a GPU's is mapped into its address space too.
  auto host = device.allocate(in + out, MemoryKind::HostVisible);
  if (!host)
    return host.status();
  Stream &stream = device.stream(0);
  auto *base = static_cast<uint8_t *>((*host)->data());
  std::memcpy((*host)->host(), mine.data(), in);
  if (Status st = ranks.allGather(stream, {base, DType::I32, mine.size()},
                                  {base + in, DType::I32, out / 4});
      !st)
    return st;
  if (Status st = stream.synchronize(); !st)
    return st;
  const auto *all = reinterpret_cast<const int32_t *>(
      static_cast<const uint8_t *>((*host)->host()) + in);
  return std::vector<int32_t>(all, all + out / 4);
}

Status agreeOnPlan(Collective &ranks, Device &device, uint64_t planChecksum, int planRanks) {
  // Each rank's checksum as two I32 words, and its view of the plan's ranks.
  std::vector<int32_t> mine(3);
  std::memcpy(mine.data(), &planChecksum, 8);
  mine[2] = planRanks;
  auto gathered = gatherWords(ranks, device, mine);
  if (!gathered)
    return gathered.status();
  const std::vector<int32_t> &all = *gathered;
  std::ostringstream differ;
  for (int r = 0; r < ranks.size(); ++r) {
    uint64_t sum;
    std::memcpy(&sum, &all[3 * size_t(r)], 8);
    if (sum != planChecksum)
      differ << (differ.tellp() ? ", " : "") << r;
  }
  if (differ.tellp())
    return Status::error("rank " + std::to_string(ranks.rank()) +
                         " and rank(s) " + differ.str() +
                         " loaded different plans (checksums differ): every rank must run "
                         "the same plan directory");
  if (planRanks != ranks.size())
    return Status::error("the plan is compiled for " + std::to_string(planRanks) +
                         " rank(s), but " + std::to_string(ranks.size()) +
                         " were launched: launch " + std::to_string(planRanks) +
                         " (mpirun -np " + std::to_string(planRanks) +
                         ") or recompile the plan for " + std::to_string(ranks.size()));
  return Status::ok();
}

} // namespace moe::rt

namespace moe::rt {

std::string Collective::sendOverflow(const std::vector<size_t> &sendCounts, const DeviceArray &send) {
  const size_t total = std::accumulate(sendCounts.begin(), sendCounts.end(), size_t(0));
  if (total <= send.count)
    return "";
  return "all_to_all_v: the send counts add up to " + std::to_string(total) +
         " elements; the send buffer holds " + std::to_string(send.count);
}

} // namespace moe::rt
