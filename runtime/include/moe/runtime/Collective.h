//===- Collective.h - communication among the ranks of one plan -*- C++ -*-===//
//
// Typed collectives over device memory, enqueued on a stream: each runs
// after the stream's earlier work, and the stream's later work sees its
// result. Implementations: `local` (one rank; the reference), `mpi`
// (Open MPI, moe/runtime/MpiCollective.h), and NCCL with the CUDA
// backend. Arguments are checked here, once, for every implementation;
// a rank whose arguments are wrong returns an error without joining the
// collective, and the application must then end (the launcher ends the
// other ranks: see MpiCollective.h).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_COLLECTIVE_H
#define MOE_RUNTIME_COLLECTIVE_H

#include "moe/runtime/Hal.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace moe::rt {

/// `count` elements of `dtype` at `data`, in the memory of the device whose
/// stream the collective runs on. Collectives move F32, BF16 and I32.
struct DeviceArray {
  void *data = nullptr;
  DType dtype = DType::F32;
  size_t count = 0;
};

/// How long a rank waits inside one collective for its peers before the
/// collective fails (--collective-timeout). It bounds waiting, not work:
/// the ranks of a step arrive together, give or take one rank's share of
/// the step.
inline constexpr std::chrono::milliseconds kDefaultCollectiveDeadline{60'000};

class Collective {
public:
  virtual ~Collective() = default;
  /// "local", "mpi".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Whether it moves device memory that the host cannot address (a GPU's,
  /// as NCCL does); host collectives (local, MPI) move host memory only.
  virtual bool movesDeviceMemory() const { return false; }
  /// Time this rank has spent inside collectives, waiting for its peers
  /// and moving data, summed over the job's collectives and groups (read
  /// from any thread); zero for the local collective, which waits for
  /// nobody.
  virtual std::chrono::nanoseconds timeInCollectives() const { return {}; }
  /// This rank failed and will leave the job: when destroyed, do not wait
  /// for the other ranks (they may be waiting in a collective this rank
  /// will never join; the launcher ends them when this process exits).
  virtual void abandon() {}

  /// The collective among `members`, ranks of this one (ascending,
  /// distinct, this rank among them); its rank() is this rank's place in
  /// `members`. Creating one is itself collective among the members: each
  /// asks for its groups in the same order (a plan's order) before using
  /// them. Made once and kept (owned by this collective); `members` of
  /// every rank is this collective itself. Fails by name where an
  /// implementation has no groups.
  Expected<Collective *> group(const std::vector<int> &members);

  /// Every rank's `data` becomes the element-wise sum over the ranks (BF16
  /// is added in f32 and rounded to nearest even; I32 wraps).
  Status allReduce(Stream &stream, DeviceArray data);
  /// `out` (size() * in.count elements) becomes every rank's `in`, in rank
  /// order.
  Status allGather(Stream &stream, DeviceArray in, DeviceArray out);
  /// Sends the first sendCounts[0] elements of `send` to rank 0, the next
  /// sendCounts[1] to rank 1, and so on; `recv` receives, in rank order,
  /// what each rank sends to this one, and recvCounts[r] how many elements
  /// came from rank r. The counts are exchanged at run time (dispatch and
  /// combine know them only from the routing); more than recv.count
  /// arriving, or counts adding up to more than send.count, fails on every
  /// rank. sendCounts (sized size() when enqueued) is read and recvCounts
  /// filled when the stream reaches this point, so that earlier work on
  /// the stream may compute the counts: both must live until then.
  Status allToAllV(Stream &stream, DeviceArray send, const std::vector<size_t> &sendCounts,
                   DeviceArray recv, std::vector<size_t> &recvCounts);

protected:
  /// The error when sendCounts add up to more than `send` holds, else "".
  static std::string sendOverflow(const std::vector<size_t> &sendCounts, const DeviceArray &send);
  /// A new collective among `members` (checked, and neither one rank nor
  /// every rank); by default an error: this implementation has no groups.
  virtual Expected<std::unique_ptr<Collective>> makeGroup(const std::vector<int> &members);
  /// Destroys the groups made so far (an implementation whose groups need
  /// it alive calls this first in its destructor).
  void dropGroups() { groups_.clear(); }
  virtual Status doAllReduce(Stream &stream, DeviceArray data) = 0;
  virtual Status doAllGather(Stream &stream, DeviceArray in, DeviceArray out) = 0;
  virtual Status doAllToAllV(Stream &stream, DeviceArray send,
                             const std::vector<size_t> &sendCounts, DeviceArray recv,
                             std::vector<size_t> &recvCounts) = 0;

private:
  std::map<std::vector<int>, std::unique_ptr<Collective>> groups_;
};

/// The single-rank collective.
std::unique_ptr<Collective> createLocalCollective();

/// Every rank's `mine` (the same number of words on each), in rank order:
/// host words staged through `device`'s memory and gathered on its stream
/// 0. For small agreements among the ranks (plan checksums, routing
/// counts).
Expected<std::vector<int32_t>> gatherWords(Collective &ranks, Device &device,
                                           const std::vector<int32_t> &mine);

/// 64-bit numbers among the I32 words gatherWords moves: two words, the
/// low 32 bits first.
inline void appendWide(std::vector<int32_t> &words, uint64_t v) {
  words.push_back(int32_t(uint32_t(v)));
  words.push_back(int32_t(uint32_t(v >> 32)));
}
inline uint64_t readWide(const int32_t *w) {
  return uint64_t(uint32_t(w[0])) | uint64_t(uint32_t(w[1])) << 32;
}

/// Before a plan's first step: every rank must have loaded the plan whose
/// body checksum is `planChecksum`, and the job must have `planRanks` ranks.
/// Fails on every rank, with one line naming the ranks that differ.
Status agreeOnPlan(Collective &ranks, Device &device, uint64_t planChecksum, int planRanks);

} // namespace moe::rt

#endif
