//===- ThreadPool.cpp - the kernels' threads ------------------------------===//
//
// A region publishes (generation, next chunk) in one 64-bit word; a thread
// claims a chunk with a compare-and-swap that also checks the generation, so
// a helper that wakes late for a finished region claims nothing and never
// touches its body. The caller waits until every claimed chunk is finished.
// Helpers and the waiting caller spin for about a millisecond, then sleep
// on a futex.
//
// On a machine with more runnable threads than cores (busy processes
// beside us) helpers cost more than they give: each wake and spin takes
// time the scheduler would give the caller, and a helper descheduled while
// it holds a chunk holds up the region. The caller's involuntary context
// switches tell: while it is preempted more than kBusyRate times a second
// (the median of the last samples: a quiet machine has bursts too),
// regions run on the caller alone.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/ThreadPool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace moe::cpu {

namespace {

void futexWait(std::atomic<uint32_t> &word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futexWakeAll(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

/// Spins on `ready` for kSpins pauses, then sleeps on `word` while it still
/// holds `expected`. No sched_yield: a yielding thread stays runnable and
/// takes its share of a busy core from the thread that has the work.
/// 30000 pauses are about a millisecond (31 ns a pause on a Zen 3): longer
/// than the gaps between a decode step's shared regions, where attention,
/// the router and the norms run on the caller alone, so that a helper is
/// still spinning when the next region starts. 2000 (63 us) let it fall
/// asleep in those gaps, and waking it cost bf16 and int8 decodes of the
/// benchmark model 10% on a 2-core Zen 3 VM (8 rounds interleaved each);
/// beside two busy loops decode kept 0.56-0.79 of its quiet rate, against
/// 0.52-0.63 (make bench-contention, the same rounds).
constexpr int kSpins = 30000;
template <typename Ready>
void await(Ready ready, std::atomic<uint32_t> &word, uint32_t expected,
           std::atomic<int> &sleepers) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready())
      return;
    __builtin_ia32_pause();
  }
  while (!ready()) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (!ready() && word.load(std::memory_order_seq_cst) == expected)
      futexWait(word, expected);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    expected = word.load(std::memory_order_acquire);
  }
}

using Clock = std::chrono::steady_clock;
/// Preemptions of the caller per second above which the machine is taken
/// as oversubscribed (quiet, most 20 ms samples see none, a few a burst of
/// several; beside busy loops most see about 3, one a time slice), how
/// often that is sampled, and over how many samples the median is taken.
constexpr double kBusyRate = 100;
constexpr std::chrono::milliseconds kSample{20};
constexpr size_t kSamples = 5;

/// Involuntary context switches of the calling thread so far.
long preemptionsOfThisThread() {
  rusage usage;
  return getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : 0;
}

int coresAvailable() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

/// The chunk index of a claim word while a region is being set up: no
/// count reaches it, so nothing can be claimed.
constexpr uint64_t kClosed = 0xffffffffu;

struct Chunks::Shared {
  std::atomic<uint64_t> claim{0};   ///< generation << 32 | next chunk
  std::atomic<int64_t> unfinished{0};
  // Published with `claim` (release); read after a claim of the region, or
  // (count) by a late thread whose claim then fails.
  std::atomic<int64_t> count{0};
  std::atomic<const std::function<void(Chunks &)> *> body{nullptr};
  std::atomic<uint32_t> wake{0};    ///< futex: bumped per region and at exit
  std::atomic<uint32_t> finished{0}; ///< futex: bumped when a region's last chunk ends
  std::atomic<int> helpersAsleep{0}, callerAsleep{0};
  std::atomic<bool> stop{false};

  /// Claims a chunk of region `generation`; -1 when there is none.
  int64_t claimOne(uint32_t generation) {
    uint64_t v = claim.load(std::memory_order_acquire);
    for (;;) {
      if (uint32_t(v >> 32) != generation ||
          int64_t(v & 0xffffffffu) >= count.load(std::memory_order_acquire))
        return -1;
      if (claim.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel))
        return int64_t(v & 0xffffffffu);
    }
  }
  void finishOne() {
    if (unfinished.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      finished.fetch_add(1, std::memory_order_release);
      if (callerAsleep.load(std::memory_order_seq_cst))
        futexWakeAll(finished);
    }
  }
};

bool Chunks::next(int64_t &chunk) {
  if (holding_) {
    holding_ = false;
    shared_.finishOne();
  }
  chunk = pending_ >= 0 ? pending_ : shared_.claimOne(generation_);
  pending_ = -1;
  holding_ = chunk >= 0;
  return holding_;
}

bool Chunks::exhausted() const {
  const uint64_t v = shared_.claim.load(std::memory_order_acquire);
  return uint32_t(v >> 32) != generation_ ||
         int64_t(v & 0xffffffffu) >= shared_.count.load(std::memory_order_acquire);
}

class ThreadPool {
public:
  static ThreadPool &get() {
    static ThreadPool pool;
    return pool;
  }

  int threads() {
    std::lock_guard<std::mutex> lock(run_);
    return int(helpers_.size()) + 1;
  }

  void resize(int threads) {
    std::lock_guard<std::mutex> lock(run_);
    stopHelpers();
    if (threads <= 0)
      threads = coresAvailable();
    s_.stop = false;
    // What a helper has seen is taken here, not when its thread starts: a
    // region or a stop may come first.
    const uint32_t seen = s_.wake.load(std::memory_order_acquire);
    for (int i = 1; i < threads; ++i)
      helpers_.emplace_back([this, seen] { helperLoop(seen); });
  }

  void run(int64_t count, const std::function<void(Chunks &)> &body) {
    if (count <= 0)
      return;
    std::unique_lock<std::mutex> lock(run_, std::try_to_lock);
    if (!lock.owns_lock() || helpers_.empty() || count == 1 || oversubscribed()) {
      // Another stream has the helpers, nothing to share, or no core for them.
      runAlone(count, body);
      return;
    }
    const uint32_t generation = ++generation_;
    // Close the claim word to the last region before its count changes: a
    // thread still claiming from that region (it read the old generation)
    // must not pair it with the new count, claim an index the old region
    // never had, and finish it against this region (one finish too many:
    // this region would end with a chunk still running, and the next wait
    // for ever). Its compare-and-swap fails on the closed word instead.
    s_.claim.store(uint64_t(generation) << 32 | kClosed, std::memory_order_seq_cst);
    s_.count.store(count, std::memory_order_release);
    s_.body.store(&body, std::memory_order_relaxed);
    s_.unfinished.store(count, std::memory_order_relaxed);
    const uint32_t finished = s_.finished.load(std::memory_order_relaxed);
    s_.claim.store(uint64_t(generation) << 32, std::memory_order_release);
    s_.wake.fetch_add(1, std::memory_order_seq_cst);
    if (s_.helpersAsleep.load(std::memory_order_seq_cst))
      futexWakeAll(s_.wake);
    Chunks mine(s_, generation, -1);
    body(mine);
    // Chunks other threads still hold.
    await([&] { return s_.unfinished.load(std::memory_order_acquire) == 0; }, s_.finished,
          finished, s_.callerAsleep);
  }

  ~ThreadPool() {
    std::lock_guard<std::mutex> lock(run_);
    stopHelpers();
  }

private:
  ThreadPool() { resize(0); }

  /// Whether regions run alone for now: every kSample, the caller's
  /// preemption rate since the last sample (on the same thread) joins the
  /// last kSamples, and their median decides.
  bool oversubscribed() {
    const Clock::time_point now = Clock::now();
    if (now - sampledAt_ >= kSample) {
      const long preemptions = preemptionsOfThisThread();
      const std::thread::id me = std::this_thread::get_id();
      if (me != sampler_)
        rates_.clear();
      else if (rates_.push_back(double(preemptions - preemptions_) /
                                std::chrono::duration<double>(now - sampledAt_).count());
               rates_.size() > kSamples)
        rates_.erase(rates_.begin());
      std::vector<double> sorted = rates_;
      std::sort(sorted.begin(), sorted.end());
      alone_ = sorted.size() == kSamples && sorted[kSamples / 2] > kBusyRate;
      sampler_ = me;
      preemptions_ = preemptions;
      sampledAt_ = now;
    }
    return alone_;
  }

  static void runAlone(int64_t count, const std::function<void(Chunks &)> &body) {
    Chunks::Shared solo;
    solo.count = count;
    solo.unfinished = count;
    Chunks mine(solo, 0, -1);
    body(mine);
  }

  void helperLoop(uint32_t seen) {
    for (;;) {
      await([&] { return s_.wake.load(std::memory_order_acquire) != seen; }, s_.wake, seen,
            s_.helpersAsleep);
      seen = s_.wake.load(std::memory_order_acquire);
      if (s_.stop.load(std::memory_order_acquire))
        return;
      const uint32_t generation = uint32_t(s_.claim.load(std::memory_order_acquire) >> 32);
      const int64_t first = s_.claimOne(generation);
      if (first < 0)
        continue; // woke late: the region is done or fully claimed
      // Holding a chunk keeps the region, and so its body, alive.
      Chunks chunks(s_, generation, first);
      (*s_.body.load(std::memory_order_relaxed))(chunks);
    }
  }

  void stopHelpers() {
    s_.stop = true;
    s_.wake.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(s_.wake);
    for (std::thread &t : helpers_)
      t.join();
    helpers_.clear();
  }

  Chunks::Shared s_;
  std::vector<std::thread> helpers_;
  std::mutex run_;
  uint32_t generation_ = 0;
  // Guarded by run_: the last sample of preemptions, the last rates, and
  // whether regions run alone.
  std::thread::id sampler_;
  long preemptions_ = 0;
  Clock::time_point sampledAt_;
  std::vector<double> rates_;
  bool alone_ = false;
};

void parallelChunks(int64_t count, const std::function<void(Chunks &)> &body) {
  ThreadPool::get().run(count, body);
}

int kernelThreads() { return ThreadPool::get().threads(); }

void setKernelThreads(int threads) { ThreadPool::get().resize(threads); }

} // namespace moe::cpu
