//===- ThreadPool.h - the kernels' threads ----------------------*- C++ -*-===//
//
// One pool of threads for every kernel and every stream. A parallel region
// splits its work into chunks that threads claim one at a time, the caller
// among them: when the machine is busy and a helper is not running, the
// threads that are take its chunks, instead of everyone waiting for it
// (OpenMP's static split made decode collapse beside busy processes). Idle
// helpers spin only briefly, then sleep on a futex, so they never hold a
// core that other work needs. Only one region runs on the helpers at a
// time; a region started meanwhile (another stream) runs on its own thread.
// While the caller is preempted often (more runnable threads than cores),
// regions run on the caller alone.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_THREADPOOL_H
#define MOE_KERNELS_CPU_THREADPOOL_H

#include <algorithm>
#include <cstdint>
#include <functional>

namespace moe::cpu {

/// The chunks of one region, as one thread sees them.
class Chunks {
public:
  /// Claims the next chunk (the one claimed before counts as finished):
  /// true with its index in `chunk`, false when none is left.
  bool next(int64_t &chunk);
  /// Whether every chunk of the region has been claimed, by any thread.
  bool exhausted() const;

private:
  friend class ThreadPool;
  struct Shared;
  Chunks(Shared &shared, uint32_t generation, int64_t first)
      : shared_(shared), generation_(generation), pending_(first) {}
  Shared &shared_;
  uint32_t generation_;
  int64_t pending_;    ///< claimed before the body ran, -1 when none
  bool holding_ = false;
};

/// Runs `body` on up to kernelThreads() threads, the caller among them,
/// until all `count` chunks are claimed and finished; returns then. `body`
/// runs once per participating thread (set up per-thread scratch, then
/// loop on Chunks::next); chunks are indices [0, count).
void parallelChunks(int64_t count, const std::function<void(Chunks &)> &body);

/// The chunks of `grain` consecutive indices that cover [0, n).
inline int64_t chunksOf(int64_t n, int64_t grain) { return (n + grain - 1) / grain; }

/// f(i) for every index i of the chunks (of `grain` indices of [0, n)) this
/// thread claims.
template <typename F> void forClaimed(Chunks &chunks, int64_t n, int64_t grain, F &&f) {
  for (int64_t c; chunks.next(c);)
    for (int64_t i = c * grain, end = i + grain < n ? i + grain : n; i < end; ++i)
      f(i);
}

/// Threads a region may use (the caller plus helpers).
int kernelThreads();
/// Sets it; 0: one per core this process may run on. Waits for a running
/// region to finish.
void setKernelThreads(int threads);

/// f(r) for r < rows, shared between the threads (a few runs of rows each)
/// when rows x cols elements are worth waking them.
template <typename F> void forRows(int64_t rows, int64_t cols, F &&f) {
  constexpr int64_t kParallelElements = 1 << 15, kRunsPerThread = 4;
  if (rows <= 0)
    return;
  const int64_t runs = rows * cols >= kParallelElements
                           ? std::min<int64_t>(rows, kernelThreads() * kRunsPerThread)
                           : 1;
  const int64_t grain = chunksOf(rows, runs);
  parallelChunks(chunksOf(rows, grain),
                 [&](Chunks &chunks) { forClaimed(chunks, rows, grain, f); });
}

} // namespace moe::cpu

#endif
