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
// Every wait has a deadline. A rank that waits longer for its peers asks
// each of them, on a second communicator, which collective it is in (a
// rank waiting in a collective answers between its tests); the peers that
// do not answer within a few seconds are the stopped or lost ones, and the
// collective fails naming them.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/MpiCollective.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <string>
#include <vector>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
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
// After this long without its peers, a collective sleeps longer between
// tests: it waits for a rank that has other work, not for a fragment.
constexpr auto kIdleAfter = std::chrono::milliseconds(20000);
constexpr int kIdleSleepMicroseconds = 2000;

// After the deadline: how long the peers have to answer "which collective
// are you in?", and the tags of the question and the answer.
constexpr auto kAnswerTime = std::chrono::seconds(3);
constexpr int kQuestionTag = 1, kAnswerTag = 2;

// What a rank waits in, as the answer says it.
enum class Op : uint64_t { None, AllReduce, AllGather, AllToAllV };

const char *opName(Op op) {
  switch (op) {
  case Op::AllReduce: return "all_reduce";
  case Op::AllGather: return "all_gather";
  case Op::AllToAllV: return "all_to_all_v";
  case Op::None: break;
  }
  return "no collective";
}

// For the SIGTERM line: set once, before the handler is installed.
char abortLine[256];
size_t abortLineLength = 0;

void onTerminate(int) {
  // Only async-signal-safe calls here.
  ssize_t ignored = ::write(STDERR_FILENO, abortLine, abortLineLength);
  (void)ignored;
  ::_exit(1);
}

// What the communicators of one job share: the side communicator for
// questions and answers, the deadline, and which collective this rank is in
// (numbered over the job: every rank runs the same collectives in the same
// order, each among its own group).
struct MpiJob {
  MPI_Comm side = MPI_COMM_NULL; // world ranks
  MPI_Op bf16Sum = MPI_OP_NULL;
  std::chrono::milliseconds deadline{0};
  uint64_t count = 0;
  Op op = Op::None;
  std::array<uint64_t, 2> answer{};
  int rank = 0, size = 1; // in the world
  std::atomic<int64_t> nanoseconds{0}; // inside collectives (complete())
  bool initialized = false;
  bool abandoned = false;
};

class MpiCollective final : public Collective {
public:
  ~MpiCollective() override {
    if (job_->abandoned)
      return; // MPI_Finalize would wait for ranks that wait for us
    dropGroups(); // their communicators go before MPI does
    MPI_Comm_free(&comm_);
    if (among_.empty()) {
      MPI_Op_free(&job_->bf16Sum);
      MPI_Comm_free(&job_->side);
      if (job_->initialized)
        MPI_Finalize();
    }
  }

  void abandon() override { job_->abandoned = true; }

  static Expected<std::unique_ptr<Collective>> create(const std::string &program,
                                                      std::chrono::milliseconds deadline) {
    auto job = std::make_shared<MpiJob>();
    job->deadline = deadline;
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return Status::error("mpi: MPI_Init_thread failed");
      job->initialized = true;
    }
    // Errors come back as codes, also those a nonblocking collective's
    // progress reports against the world communicator (a message longer
    // than its receive: ranks that disagree on a step).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::unique_ptr<MpiCollective> c(new MpiCollective(job));
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm_);
    MPI_Comm_set_errhandler(c->comm_, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &job->side);
    MPI_Comm_set_errhandler(job->side, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm_, &job->rank);
    MPI_Comm_size(c->comm_, &job->size);
    c->rank_ = job->rank;
    c->size_ = job->size;
    MPI_Op_create(bf16Sum, /*commute=*/1, &job->bf16Sum);
    int n = std::snprintf(abortLine, sizeof abortLine,
                          "%s: rank %d of %d: stopped: the job was ended (another rank failed "
                          "or was killed)\n",
                          program.c_str(), job->rank, job->size);
    abortLineLength = n > 0 ? std::min(size_t(n), sizeof abortLine - 1) : 0;
    std::signal(SIGTERM, onTerminate);
    return std::unique_ptr<Collective>(std::move(c));
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::nanoseconds timeInCollectives() const override {
    return std::chrono::nanoseconds(job_->nanoseconds.load());
  }

protected:
  Status doAllReduce(Stream &stream, DeviceArray data) override {
    return stream.enqueueHost([this, data] {
      begin(Op::AllReduce);
      MPI_Op op = data.dtype == DType::BF16 ? job_->bf16Sum : MPI_SUM;
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
      begin(Op::AllGather);
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
      begin(Op::AllToAllV);
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
                                           " elements arrive at rank " + std::to_string(job_->rank) +
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

  /// A communicator of `members` of this one's ranks (MPI_Comm_create_group:
  /// collective among the members only, so each rank creates just its own
  /// groups).
  Expected<std::unique_ptr<Collective>> makeGroup(const std::vector<int> &members) override {
    MPI_Group all, some;
    if (Status st = check("MPI_Comm_group", MPI_Comm_group(comm_, &all)); !st)
      return st;
    int made = MPI_Group_incl(all, int(members.size()), members.data(), &some);
    MPI_Group_free(&all);
    if (Status st = check("MPI_Group_incl", made); !st)
      return st;
    std::unique_ptr<MpiCollective> c(new MpiCollective(job_));
    made = MPI_Comm_create_group(comm_, some, /*tag=*/0, &c->comm_);
    MPI_Group_free(&some);
    if (Status st = check("MPI_Comm_create_group", made); !st)
      return st;
    MPI_Comm_set_errhandler(c->comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm_, &c->rank_);
    MPI_Comm_size(c->comm_, &c->size_);
    // Named by world ranks in messages.
    std::vector<int> world(members.size());
    MPI_Group mine, worldGroup;
    MPI_Comm_group(c->comm_, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &worldGroup);
    std::vector<int> positions(members.size());
    for (size_t i = 0; i < positions.size(); ++i)
      positions[i] = int(i);
    MPI_Group_translate_ranks(mine, int(positions.size()), positions.data(), worldGroup,
                              world.data());
    MPI_Group_free(&mine);
    MPI_Group_free(&worldGroup);
    for (int r : world)
      c->among_ += (c->among_.empty() ? " among ranks " : ", ") + std::to_string(r);
    return std::unique_ptr<Collective>(std::move(c));
  }

private:
  explicit MpiCollective(std::shared_ptr<MpiJob> job) : job_(std::move(job)) {}

  Status check(const char *call, int code) const {
    if (code == MPI_SUCCESS)
      return Status::ok();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
      length = std::snprintf(text, sizeof text, "error %d", code);
    return Status::error("mpi: " + std::string(call) + " failed on rank " +
                         std::to_string(job_->rank) + among_ + ": " +
                         std::string(text, size_t(length)));
  }

  /// SCHED_FIFO priority 1 for the calling thread, or back to SCHED_OTHER;
  /// whether it took.
  static bool raise(bool up) {
    sched_param sp{};
    sp.sched_priority = up ? 1 : 0;
    return ::pthread_setschedparam(::pthread_self(), up ? SCHED_FIFO : SCHED_OTHER, &sp) == 0;
  }

  /// Called by each collective's host work when it starts.
  void begin(Op op) {
    ++job_->count;
    job_->op = op;
    job_->answer = {uint64_t(op), job_->count};
  }

  /// Waits for a request `call` started (if `code` says it did): tests it,
  /// spinning for a while (a quick collective), then sleeping between tests
  /// and answering the peers' questions, until the deadline.
  Status complete(const char *call, int code, MPI_Request &request) {
    if (code != MPI_SUCCESS)
      return check(call, code);
    const auto start = std::chrono::steady_clock::now();
    struct Timed {
      std::atomic<int64_t> &total;
      std::chrono::steady_clock::time_point start;
      ~Timed() {
        total += std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
      }
    } timed{job_->nanoseconds, start};
    const auto spinUntil = start + std::chrono::microseconds(kSpinMicroseconds);
    const auto giveUp = start + job_->deadline;
    // Sleeps as short as asked (Linux rounds a thread's timers up by 50 us
    // by default), on this thread only.
    static thread_local bool precise = ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
    (void)precise;
    // Real-time priority while the thread waits, so that each wakeup to
    // test (and move the next fragment) preempts whatever else runs on the
    // core at once instead of at the next scheduler tick: on a busy node a
    // normal thread's 80 us sleep became milliseconds, and a step of a
    // small model took 150 times longer. A stream's own worker (it only
    // waits) keeps it; a thread that computes (the main one, a server's
    // engine thread) has its own priority back when the collective ends.
    static thread_local bool raisedForGood = onStreamWorker() && raise(true);
    struct Lowered {
      bool active;
      ~Lowered() {
        if (active)
          raise(false);
      }
    } lowered{!raisedForGood && raise(true)};
    int sleep = kSleepMicroseconds;
    // Gaps between two tests longer than a second: this rank was itself
    // stopped (SIGSTOP) or not scheduled, which the message says.
    auto last = start;
    std::chrono::steady_clock::duration stalled{};
    for (;;) {
      int done = 0;
      if (int tested = MPI_Test(&request, &done, MPI_STATUS_IGNORE); tested != MPI_SUCCESS)
        return check(call, tested);
      if (done)
        return Status::ok();
      const auto now = std::chrono::steady_clock::now();
      if (now - last > std::chrono::seconds(1))
        stalled += now - last;
      last = now;
      if (now > spinUntil) {
        answerQuestions();
        if (now > giveUp)
          return overdue(now - start, stalled);
        std::this_thread::sleep_for(std::chrono::microseconds(sleep));
        // A peer that is late; one that has not come for a while (an idle
        // server's rank waiting for rank 0's next step) is tested less often.
        sleep = std::min(2 * sleep, now - start > kIdleAfter ? kIdleSleepMicroseconds
                                                             : kLongestSleepMicroseconds);
      }
    }
  }

  /// Answers every peer that asked which collective this rank waits in.
  void answerQuestions() {
    for (;;) {
      int asked = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kQuestionTag, job_->side, &asked, &status) !=
              MPI_SUCCESS ||
          !asked)
        return;
      int question = 0;
      MPI_Request reply;
      if (MPI_Recv(&question, 1, MPI_INT, status.MPI_SOURCE, kQuestionTag, job_->side,
                   MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          MPI_Isend(job_->answer.data(), 2, MPI_UINT64_T, status.MPI_SOURCE, kAnswerTag,
                    job_->side, &reply) != MPI_SUCCESS)
        return;
      MPI_Request_free(&reply); // the answer stays as it is while this rank waits
    }
  }

  /// The collective waited past the deadline: asks every peer of the job
  /// where it is and fails with one line naming those that did not answer.
  Status overdue(std::chrono::steady_clock::duration waited,
                 std::chrono::steady_clock::duration stalled) {
    const MpiJob &job = *job_;
    const int me = job.rank; // in the world
    const size_t n = size_t(job.size);
    int question = me;
    std::vector<std::array<uint64_t, 2>> answers(n);
    std::vector<MPI_Request> asks(n, MPI_REQUEST_NULL), replies(n, MPI_REQUEST_NULL);
    std::vector<bool> answered(n, false);
    answered[size_t(me)] = true;
    for (int p = 0; p < job.size; ++p)
      if (p != me) {
        MPI_Isend(&question, 1, MPI_INT, p, kQuestionTag, job.side, &asks[size_t(p)]);
        MPI_Irecv(answers[size_t(p)].data(), 2, MPI_UINT64_T, p, kAnswerTag, job.side,
                  &replies[size_t(p)]);
      }
    const auto until = std::chrono::steady_clock::now() + kAnswerTime;
    size_t waiting = n - 1;
    while (waiting && std::chrono::steady_clock::now() < until) {
      answerQuestions(); // the peers that time out too ask this rank
      for (size_t p = 0; p < n; ++p) {
        int done = 0;
        if (!answered[p] && MPI_Test(&replies[p], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
            done) {
          answered[p] = true;
          --waiting;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The requests of the silent peers stay posted: this rank leaves the
    // job (the caller abandons the collective), and MPI_Cancel of a send
    // may itself wait.
    std::string silent, elsewhere;
    for (size_t p = 0; p < n; ++p) {
      if (!answered[p]) {
        silent += (silent.empty() ? "" : ", ") + std::to_string(p);
        continue;
      }
      if (int(p) == me || (answers[p][0] == uint64_t(job.op) && answers[p][1] == job.count))
        continue;
      elsewhere += "; rank " + std::to_string(p) + " waits in " +
                   opName(Op(answers[p][0])) + " number " + std::to_string(answers[p][1]);
    }
    auto seconds = [](std::chrono::steady_clock::duration d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
    };
    std::string line = "rank " + std::to_string(me) + ": " + opName(job.op) + " number " +
                       std::to_string(job.count) + among_ + " waited " + seconds(waited) +
                       " for its peers (--collective-timeout); ";
    if (stalled > std::chrono::seconds(1))
      line += "this rank was itself stopped or not scheduled for " + seconds(stalled) +
              " of it; ";
    if (!silent.empty())
      line += std::string(silent.find(',') == std::string::npos ? "rank " : "ranks ") + silent +
              " did not answer (stopped, lost, or working outside any collective)";
    else
      line += "every rank answered";
    return Status::error(line + elsewhere);
  }

  std::shared_ptr<MpiJob> job_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1; // in comm_
  // A group's world ranks, for messages (" among ranks 2, 3"); empty for
  // the world.
  std::string among_;
};

} // namespace

bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("PMI_RANK");
}

Expected<std::unique_ptr<Collective>> createMpiCollective(const std::string &program,
                                                          std::chrono::milliseconds deadline) {
  if (deadline <= std::chrono::milliseconds(0))
    return Status::error("mpi: the collective deadline must be positive");
  return MpiCollective::create(program, deadline);
}

} // namespace moe::rt

