//===- Ranks.h - joining the job a tool was launched in ---------*- C++ -*-===//
//
// A tool started by mpirun joins the MPI job (before it loads the plan: a
// rank maps only its own weights); started alone it runs as the one rank.
// Before the first step every rank checks that all loaded the same plan and
// that the job has as many ranks as the plan has programs. Every
// collective of the job waits at most --collective-timeout for its peers.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_RANKS_H
#define MOE_TOOLS_COMMON_RANKS_H

#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Session.h"
#include "tools/common/Cli.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace moe::tools {

/// --collective-timeout SECONDS: the longest one rank waits inside one
/// collective for its peers.
inline void addCollectiveTimeout(Cli &cli, double &seconds) {
  cli.app
      .add_option("--collective-timeout", seconds,
                  "under mpirun: fail, naming the rank that did not come, when a rank waits "
                  "longer than SECONDS for its peers inside one collective (a stopped or lost "
                  "peer); a step's work does not count, only the wait (default " +
                      std::to_string(rt::kDefaultCollectiveDeadline.count() / 1000) + ")")
      ->check(positiveFinite())
      ->type_name("SECONDS");
}

/// The job's collective: MPI's under mpirun, else the local one.
inline rt::Expected<std::unique_ptr<rt::Collective>>
joinJob(const std::string &tool,
        double timeoutSeconds = rt::kDefaultCollectiveDeadline.count() / 1000.0) {
  if (rt::launchedByMpi())
    return rt::createMpiCollective(
        tool, std::chrono::milliseconds(std::max<int64_t>(1, int64_t(timeoutSeconds * 1000))));
  return rt::createLocalCollective();
}

/// Every rank of `ranks` runs `plan`, or the one-line reason they cannot.
inline rt::Status agreeOnPlan(rt::Collective &ranks, const rt::LoadedPlan &plan,
                              rt::Device &device) {
  return rt::agreeOnPlan(ranks, device, plan.checksum(), plan.ranks());
}

/// Every rank runs the same requests and rank 0 reports: the others' standard
/// output goes to /dev/null (their errors still reach standard error).
inline rt::Status quietUnlessRankZero(const rt::Collective &ranks) {
  if (ranks.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    return rt::Status::error("cannot silence the standard output of rank " +
                             std::to_string(ranks.rank()));
  return rt::Status::ok();
}

using rt::appendWide;
using rt::readWide;

/// Whether the ranks of `plan` hold different tokens (data-parallel
/// attention: rank `rank`'s program exchanges expert rows with all_to_all_v,
/// as Session::stepsWithRanks says once a session exists).
inline bool ranksHoldDifferentTokens(const rt::LoadedPlan &plan, int rank) {
  for (const plan::Instruction *inst : *plan.plan().programs()->Get(uint32_t(rank))->instructions())
    if (inst->collective() == plan::CollectiveOp::AllToAllV)
      return true;
  return false;
}

/// With several ranks, one line per rank (rank 0 gets them; every rank must
/// call it): the weights and arena its program states, its peak resident
/// memory, so that a sharded plan's ranks can be seen to hold their shard
/// and not the whole model, and the bytes it handed to the plan's
/// collectives (`collectiveBytes`, its own). When the ranks' counters
/// count the expert rows each computes (`load`: expert parallelism over
/// replicated tokens, placed or not), also each rank's rows and their
/// max/mean over the ranks per MoE layer: the balance the placement gave,
/// as the runtime measured it.
inline rt::Expected<std::string> rankReport(rt::Collective &ranks, rt::Device &device,
                                            const rt::LoadedPlan &plan,
                                            uint64_t collectiveBytes,
                                            const std::vector<rt::ExpertLoad> *load) {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  // KiB, then 64-bit numbers: the bytes, then the rows of each MoE layer.
  std::vector<int32_t> mine = {int32_t(usage.ru_maxrss)};
  appendWide(mine, collectiveBytes);
  const size_t layers = load ? load->size() : 0;
  for (size_t l = 0; l < layers; ++l) {
    uint64_t rows = 0;
    for (uint64_t c : (*load)[l].counts)
      rows += c;
    appendWide(mine, rows);
  }
  auto all = rt::gatherWords(ranks, device, mine);
  if (!all)
    return all.status();
  const size_t stride = mine.size();
  auto read = [&](int r, size_t i) { return readWide(&(*all)[size_t(r) * stride + 1 + 2 * i]); };
  std::string lines;
  const auto *programs = plan.plan().programs();
  for (int r = 0; r < ranks.size(); ++r) {
    const auto *prog = programs->Get(uint32_t(r));
    const uint64_t bytes = read(r, 0);
    uint64_t rows = 0;
    for (size_t l = 0; l < layers; ++l)
      rows += read(r, 1 + l);
    char line[240];
    int n = std::snprintf(line, sizeof line,
                          "rank %d: weights %.1f MiB, arena %.1f MiB, peak resident %.1f MiB, "
                          "collectives %.2f MiB (%llu bytes)",
                          r, double(prog->weight_bytes()) / 1048576.0,
                          double(prog->arena_bytes()) / 1048576.0,
                          (*all)[size_t(r) * stride] / 1024.0, double(bytes) / 1048576.0,
                          (unsigned long long)bytes);
    if (load && n > 0 && size_t(n) < sizeof line)
      std::snprintf(line + n, sizeof line - size_t(n), ", expert rows %llu",
                    (unsigned long long)rows);
    lines += std::string(line) + "\n";
  }
  if (layers) {
    double sum = 0;
    for (size_t l = 0; l < layers; ++l) {
      double most = 0, total = 0;
      for (int r = 0; r < ranks.size(); ++r) {
        most = std::max(most, double(read(r, 1 + l)));
        total += double(read(r, 1 + l));
      }
      sum += total > 0 ? most / (total / ranks.size()) : 1.0;
    }
    char line[160];
    std::snprintf(line, sizeof line,
                  "expert rows per rank (the runtime's counters): max/mean %.3f per MoE layer, "
                  "mean over %zu layer(s)\n",
                  sum / double(layers), layers);
    lines += line;
  }
  return lines;
}

/// Whether rank `rank`'s counters count the expert rows it computes: its
/// program places experts (expert_rows holding some of a layer's) and the
/// ranks run the same tokens.
inline bool countsComputedRows(const rt::LoadedPlan &plan, int rank) {
  if (ranksHoldDifferentTokens(plan, rank))
    return false;
  for (const plan::Instruction *inst : *plan.plan().programs()->Get(uint32_t(rank))->instructions())
    if (const auto *e = inst->params_as_ExpertsParams(); e && e->stacked())
      return true;
  return false;
}

} // namespace moe::tools

#endif
