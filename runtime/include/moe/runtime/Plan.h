//===- Plan.h - load and verify a compiled plan -----------------*- C++ -*-===//
//
// A plan directory holds plan.moeplan (small; read and verified whole) and
// weights-<n>.bin files (mapped read-only with mmap; zero copy on CPU).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_PLAN_H
#define MOE_RUNTIME_PLAN_H

#include "moe/abi/KernelCall.h"
#include "moe/runtime/PlanView.h"
#include "moe/abi/Status.h"
#include "abi/schema/plan_generated.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace moe::rt {

/// What LoadedPlan::open does with the mapped weight files after mapping
/// them, so that the first request does not page-fault on every weight.
enum class Prefault {
  /// Nothing: each page is faulted in by the first kernel that reads it.
  Off,
  /// On a thread of the plan's own, started before open returns: readahead
  /// (MADV_WILLNEED), then the page tables populated chunk by chunk
  /// (MADV_POPULATE_READ; one read per page where the kernel lacks it).
  /// Requests run meanwhile (their faults are harmless); the thread stops
  /// and is joined when the plan is destroyed.
  Background,
  /// The same before open returns (what MAP_POPULATE would do).
  Sync,
};

/// "off", "background", "sync".
const char *prefaultName(Prefault mode);
/// The mode a name (prefaultName's) names; nullopt for any other.
std::optional<Prefault> parsePrefault(const std::string &name);

struct LoadOptions {
  /// Check every weight's checksum before open returns: open fails naming
  /// a weight whose bytes differ (the first found). Runs as a Sync prefault
  /// that verifies (see verifyWhilePrefaulting), whatever `prefault` says.
  bool verifyWeights = false;
  /// The rank that runs the plan (format 2.0): only its weight files are
  /// mapped (and verified), and program() is its program. Unset: every
  /// rank's files are mapped (tools that inspect or verify a whole plan)
  /// and program() is rank 0's.
  std::optional<int> rank;
  /// Map the weight files (false: the plan alone, for tools that only read
  /// it, such as the simulator; weightData() is then null). Verifying needs
  /// them mapped.
  bool mapWeights = true;
  /// What is done to the mapped weight files after mapping (nothing without
  /// mapWeights).
  Prefault prefault = Prefault::Background;
  /// The prefault also checks each weight's checksum, right after its pages
  /// are populated (while they are in the page cache), on two threads:
  /// prefault() says Running, Done (weightsVerified()) or Failed, naming
  /// the weight. With Background the plan can be used meanwhile, unchecked:
  /// a caller that must not serve from bad weights waits for
  /// weightsVerified() (moe-serve's /health). With Sync, open fails on a
  /// mismatch, as with verifyWeights. With Off, open refuses (nothing pages
  /// the weights in to check them).
  bool verifyWhilePrefaulting = false;
};

/// Where a plan's prefault stands (LoadedPlan::prefault()).
struct PrefaultProgress {
  enum class State {
    Off,     ///< nothing was or will be done (Prefault::Off, no weights mapped)
    Running, ///< the background threads are at work
    Done,    ///< every mapped page was populated (and, verifying, every weight matched)
    Stopped, ///< the plan was closed first (seen only by its own threads)
    Failed,  ///< verifying: a weight's checksum differs (`error` names the first found)
  };
  Prefault mode = Prefault::Off;
  State state = State::Off;
  /// Seconds from the start of the prefault to its end; while Running, to now.
  double seconds = 0;
  uint64_t bytes = 0;     ///< bytes mapped (to populate)
  uint64_t populated = 0; ///< bytes populated so far
  /// How pages were populated: MADV_POPULATE_READ (true) or one read per
  /// page (false, kernels before 5.14).
  bool populateRead = true;
  /// The kernel accepted MADV_HUGEPAGE on every mapping (whether it then
  /// backs a file mapping with huge pages is its own choice).
  bool hugePageAdvice = false;
  /// The prefault checks every weight's checksum (LoadOptions::verifyWeights
  /// or verifyWhilePrefaulting), with this algorithm (the plan's).
  bool verifying = false;
  plan::WeightChecksum checksum = plan::WeightChecksum::Checksum64;
  uint64_t weightBytes = 0; ///< verifying: bytes of the weights to check (their sizes summed)
  uint64_t verified = 0;    ///< of those, bytes of weights whose checksum matched so far
  /// Failed: "<dir>/<file>: checksum mismatch in weight '<name>' (bytes
  /// <begin>..<end>): ...", one line.
  std::string error;

  /// Every weight was checked and matched.
  bool weightsVerified() const { return verifying && state == State::Done; }
};

const char *prefaultStateName(PrefaultProgress::State state);

struct ScanPlan; // the work of a prefault (runtime/src/WeightScan.h)

class LoadedPlan {
public:
  /// Reads `dir`/plan.moeplan, checks identifier, FlatBuffers structure,
  /// format version and every index, size and offset in it, then maps the
  /// weight files and checks they are long enough.
  static Expected<std::unique_ptr<LoadedPlan>> open(const std::string &dir,
                                                    const LoadOptions &options = {});
  ~LoadedPlan();
  LoadedPlan(const LoadedPlan &) = delete;
  LoadedPlan &operator=(const LoadedPlan &) = delete;

  const plan::Plan &plan() const { return *plan_; }
  const std::string &dir() const { return dir_; }
  /// The rank it was loaded for (LoadOptions::rank; 0 when unset).
  int rank() const { return rank_; }
  /// How many ranks run the plan (its programs).
  int ranks() const { return int(plan_->programs()->size()); }
  /// The program of rank(): its instructions, inputs, outputs and memory.
  const plan::Program &program() const { return *plan_->programs()->Get(uint32_t(rank_)); }
  /// The plan file's checksum (its trailer, checked on open): ranks compare
  /// it to know they run the same plan.
  uint64_t checksum() const { return checksum_; }
  /// Bytes of weight tensor `id` (storage Weight), inside its mapped file;
  /// null for a file of a rank that was not mapped.
  const void *weightData(uint32_t id) const;
  /// The mapped bytes of weight file `file`; null for another rank's.
  const void *fileData(uint32_t file) const { return mappings_[file].data; }
  /// Where the weights' prefault (LoadOptions::prefault) stands, and their
  /// check (LoadOptions::verifyWhilePrefaulting).
  PrefaultProgress prefault() const;
  /// Blocks until the prefault has ended (at once when it is not running).
  void waitForPrefault() const;

private:
  LoadedPlan() = default;
  Status check() const;
  Status mapWeights(const std::optional<int> &rank);
  /// Starts the prefault (Sync: runs it) over the mapped files, verifying
  /// each weight on the way when asked.
  void startPrefault(Prefault mode, bool verify);
  /// Populates (and checks) every mapping, on this thread and a helper for
  /// a verifying prefault, until done, stopped or a checksum differs.
  void runPrefault(const ScanPlan &scan);
  /// The error that names weight `tensor`, whose checksum differs.
  std::string checksumMismatch(uint32_t tensor) const;

  struct Mapping {
    void *data = nullptr;
    size_t size = 0;
  };
  std::string dir_;
  std::vector<uint8_t> bytes_;
  uint64_t checksum_ = 0;
  int rank_ = 0;
  const plan::Plan *plan_ = nullptr;
  std::vector<Mapping> mappings_;

  // The prefault: written by its threads (or open's, for Sync) under mutex_.
  mutable std::mutex mutex_;
  mutable std::condition_variable ended_;
  PrefaultProgress progress_;
  std::chrono::steady_clock::time_point prefaultStart_;
  /// Set when the plan closes, or when a checksum differs: every worker
  /// stops before its next chunk.
  std::atomic<bool> stop_{false};
  std::thread prefaultThread_;
};

/// The tokens that end a generated sequence (format 1.5's eos_token_ids; an
/// older plan's eos_token_id), empty when the model names none.
std::vector<int32_t> eosTokens(const plan::Plan &plan);


} // namespace moe::rt

#endif
