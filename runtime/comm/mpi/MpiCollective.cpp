//===- MpiCollective.cpp - collectives over MPI ---------------------------===//
//
// Each collective is host work enqueued on the stream (MPI moves host
// memory, which is the CPU backend's device memory), nonblocking: the
// stream's thread tests the request, spinning briefly and then sleeping
// between tests, so that a collective waiting for its peers leaves the
// cores to the other streams' computation (overlap) instead of polling. BF16 sums use a
// user-defined MPI operation (f32 add, round to nearest even); the counts
// of all_to_all_v are exchanged with MPI_Alltoall first, and a receive
// buffer too small on any rank fails the call on every rank (an
// MPI_Allreduce of the verdict), so that no rank is left waiting.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/MpiCollective.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace moe::rt {

namespace {

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40); // NaN stays NaN
  bits += 0x7fff + ((bits >> 16) & 1);    // round to nearest even
  return uint16_t(bits >> 16);
}

void bf16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::BF16: return MPI_UINT16_T;
  case DType::I32: return MPI_INT32_T;
  default: return MPI_FLOAT;
  }
}

// How long a collective's thread tests its request without pause (the
// ranks arrive together and it completes) before it sleeps between tests,
// and how long it sleeps: briefly, because a large message moves in
// fragments that each need a test on both ranks.
constexpr int kSpinMicroseconds = 20;
constexpr int kSleepMicroseconds = 5, kLongestSleepMicroseconds = 80;

// For the SIGTERM line: set once, before the handler is installed.
char abortLine[256];
size_t abortLineLength = 0;

void onTerminate(int) {
  // Only async-signal-safe calls here.
  ssize_t ignored = ::write(STDERR_FILENO, abortLine, abortLineLength);
  (void)ignored;
  ::_exit(1);
}

class MpiCollective final : public Collective {
public:
  ~MpiCollective() override {
    if (abandoned_)
      return; // MPI_Finalize would wait for ranks that wait for us
    MPI_Op_free(&bf16Sum_);
    MPI_Comm_free(&comm_);
    if (initialized_)
      MPI_Finalize();
  }

  void abandon() override { abandoned_ = true; }

  static Expected<std::unique_ptr<Collective>> create(const std::string &program) {
    std::unique_ptr<MpiCollective> c(new MpiCollective());
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return Status::error("mpi: MPI_Init_thread failed");
      c->initialized_ = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm_);
    MPI_Comm_set_errhandler(c->comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm_, &c->rank_);
    MPI_Comm_size(c->comm_, &c->size_);
    MPI_Op_create(bf16Sum, /*commute=*/1, &c->bf16Sum_);
    int n = std::snprintf(abortLine, sizeof abortLine,
                          "%s: rank %d of %d: stopped: the job was ended (another rank failed "
                          "or was killed)\n",
                          program.c_str(), c->rank_, c->size_);
    abortLineLength = n > 0 ? std::min(size_t(n), sizeof abortLine - 1) : 0;
    std::signal(SIGTERM, onTerminate);
    return std::unique_ptr<Collective>(std::move(c));
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

protected:
  Status doAllReduce(Stream &stream, DeviceArray data) override {
    return stream.enqueueHost([this, data] {
      MPI_Op op = data.dtype == DType::BF16 ? bf16Sum_ : MPI_SUM;
      MPI_Request request;
      return complete("MPI_Iallreduce",
                      data.count > INT_MAX
                          ? MPI_ERR_COUNT
                          : MPI_Iallreduce(MPI_IN_PLACE, data.data, int(data.count),
                                           mpiType(data.dtype), op, comm_, &request),
                      request);
    });
  }

  Status doAllGather(Stream &stream, DeviceArray in, DeviceArray out) override {
    return stream.enqueueHost([this, in, out] {
      MPI_Request request;
      return complete("MPI_Iallgather",
                      in.count > INT_MAX
                          ? MPI_ERR_COUNT
                          : MPI_Iallgather(in.data, int(in.count), mpiType(in.dtype), out.data,
                                           int(in.count), mpiType(in.dtype), comm_, &request),
                      request);
    });
  }

  Status doAllToAllV(Stream &stream, DeviceArray send, const std::vector<size_t> &sendCounts,
                     DeviceArray recv, std::vector<size_t> &recvCounts) override {
    return stream.enqueueHost([this, send, &sendCounts, recv, &recvCounts]() -> Status {
      const size_t n = size_t(size_);
      std::vector<uint64_t> out(sendCounts.begin(), sendCounts.end()), in(n);
      MPI_Request request;
      if (Status st = complete("MPI_Ialltoall",
                               MPI_Ialltoall(out.data(), 1, MPI_UINT64_T, in.data(), 1,
                                             MPI_UINT64_T, comm_, &request),
                               request);
          !st)
        return st;
      // MPI counts and displacements are ints.
      std::vector<int> sc(n), sd(n), rc(n), rd(n);
      uint64_t sent = 0, received = 0;
      for (size_t r = 0; r < n; ++r) {
        sd[r] = int(std::min<uint64_t>(sent, INT_MAX));
        rd[r] = int(std::min<uint64_t>(received, INT_MAX));
        sc[r] = int(std::min<uint64_t>(out[r], INT_MAX));
        rc[r] = int(std::min<uint64_t>(in[r], INT_MAX));
        sent += out[r];
        received += in[r];
      }
      // 1: too much arrives here; 2: more than an int counts or addresses;
      // 3: more is sent than the send buffer holds.
      const std::string overflow = sendOverflow(sendCounts, send);
      int verdict = received > recv.count                 ? 1
                    : (sent > INT_MAX || received > INT_MAX) ? 2
                    : !overflow.empty()                      ? 3
                                                             : 0;
      int worst = 0;
      if (Status st = complete("MPI_Iallreduce",
                               MPI_Iallreduce(&verdict, &worst, 1, MPI_INT, MPI_MAX, comm_,
                                              &request),
                               request);
          !st)
        return st;
      if (verdict == 3)
        return Status::error(overflow);
      if (worst)
        return Status::error(
            "all_to_all_v: " +
            std::string(verdict == 1 ? std::to_string(received) +
                                           " elements arrive at rank " + std::to_string(rank_) +
                                           "; its receive buffer holds " +
                                           std::to_string(recv.count)
                        : worst == 1 ? "a receive buffer on another rank is too small"
                        : worst == 2 ? "more than 2^31 elements in one exchange"
                                     : "another rank sends more than its send buffer holds"));
      recvCounts.assign(in.begin(), in.end());
      return complete("MPI_Ialltoallv",
                      MPI_Ialltoallv(send.data, sc.data(), sd.data(), mpiType(send.dtype),
                                     recv.data, rc.data(), rd.data(), mpiType(recv.dtype), comm_,
                                     &request),
                      request);
    });
  }

private:
  MpiCollective() = default;

  Status check(const char *call, int code) const {
    if (code == MPI_SUCCESS)
      return Status::ok();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
      length = std::snprintf(text, sizeof text, "error %d", code);
    return Status::error("mpi: " + std::string(call) + " failed on rank " +
                         std::to_string(rank_) + ": " + std::string(text, size_t(length)));
  }

  /// Waits for a request `call` started (if `code` says it did): tests it,
  /// spinning for a while (a quick collective), then sleeping between tests.
  Status complete(const char *call, int code, MPI_Request &request) const {
    if (code != MPI_SUCCESS)
      return check(call, code);
    const auto spinUntil =
        std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
    // Sleeps as short as asked (Linux rounds a thread's timers up by 50 us
    // by default), on this thread only.
    static thread_local bool precise = ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
    (void)precise;
    static thread_local bool raised = [] {
      // A collective stream's thread (not the main one, which computes):
      // real-time priority, so that each wakeup to move the next fragment
      // preempts the computation at once instead of at the next scheduler
      // tick. It sleeps between tests, so it takes little of the core.
      if (::gettid() == ::getpid())
        return false;
      sched_param sp{};
      sp.sched_priority = 1;
      return ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &sp) == 0;
    }();
    (void)raised;
    int sleep = kSleepMicroseconds;
    for (;;) {
      int done = 0;
      if (int tested = MPI_Test(&request, &done, MPI_STATUS_IGNORE); tested != MPI_SUCCESS)
        return check(call, tested);
      if (done)
        return Status::ok();
      if (std::chrono::steady_clock::now() > spinUntil) {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep));
        sleep = std::min(2 * sleep, kLongestSleepMicroseconds); // a peer that is late
      }
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op bf16Sum_ = MPI_OP_NULL;
  int rank_ = 0, size_ = 1;
  bool initialized_ = false;
  bool abandoned_ = false;
};

} // namespace

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("PMI_RANK");
}

Expected<std::unique_ptr<Collective>> createMpiCollective(const std::string &program) {
  return MpiCollective::create(program);
}

} // namespace moe::rt

