//===- Timeline.h - --trace and --emulate-link of the runtime tools -*- C++ -*-===//
//
// moe-run and moe-bench share the flags that make communication visible
// and measurable: --emulate-link LATENCY_US:GB_PER_S holds every collective
// of the job as a slower link would (moe/runtime/LinkEmulation.h), and
// --trace FILE writes every rank's streams as one Chrome / Perfetto
// trace-event file (moe/runtime/Trace.h), gathered to rank 0; and
// --collective-timeout bounds each wait for the peers (Ranks.h).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_TIMELINE_H
#define MOE_TOOLS_COMMON_TIMELINE_H

#include "moe/abi/File.h"
#include "moe/runtime/LinkEmulation.h"
#include "moe/runtime/Trace.h"
#include "tools/common/Cli.h"
#include "tools/common/LinkFlag.h"
#include "tools/common/Ranks.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

namespace moe::tools {

struct TimelineFlags {
  std::string trace, link;
  double collectiveTimeout = rt::kDefaultCollectiveDeadline.count() / 1000.0;
};

inline void addTimelineFlags(Cli &cli, TimelineFlags &f) {
  cli.app
      .add_option("--trace", f.trace,
                  "write every rank's launches and collectives, per stream, to FILE as "
                  "Chrome/Perfetto trace-event JSON (open it in ui.perfetto.dev)")
      ->type_name("FILE");
  cli.app
      .add_option("--emulate-link", f.link,
                  "hold each collective as a link of LATENCY_US microseconds and GB_PER_S "
                  "GB/s would (latency + wire bytes / bandwidth), to measure overlap where "
                  "loopback is too fast")
      ->type_name("LATENCY_US:GB_PER_S")
      ->check(linkValidator());
  addCollectiveTimeout(cli, f.collectiveTimeout);
}

/// The job's collective (joinJob), over the emulated link the flags name.
inline rt::Expected<std::unique_ptr<rt::Collective>> joinJob(const std::string &tool,
                                                             const TimelineFlags &f) {
  auto job = joinJob(tool, f.collectiveTimeout);
  if (!job || f.link.empty())
    return job;
  auto link = rt::LinkModel::parse(f.link); // checked by the flag
  return rt::emulateLink(job.take(), *link);
}

/// --trace: this run's spans and, on rank 0, the file they go to (opened
/// before the work, so that a path that cannot be written fails first).
struct TraceOutput {
  rt::Trace trace;
  std::optional<rt::OutputFile> file;

  /// Null when `path` is empty.
  static rt::Expected<std::unique_ptr<TraceOutput>> open(const std::string &path, int rank) {
    if (path.empty())
      return std::unique_ptr<TraceOutput>();
    auto out = std::make_unique<TraceOutput>();
    if (rank == 0) {
      auto file = rt::OutputFile::create(path);
      if (!file)
        return file.status();
      out->file.emplace(file.take());
    }
    return out;
  }

  /// Every rank's spans into the file (every rank calls it).
  rt::Status write(rt::Collective &ranks, rt::Device &device) {
    const std::string mine = trace.events(ranks.rank());
    // The lengths, then every rank's text padded to the longest, as words.
    auto lengths = rt::gatherWords(ranks, device, {int32_t(mine.size())});
    if (!lengths)
      return lengths.status();
    const size_t longest = size_t(*std::max_element(lengths->begin(), lengths->end()));
    std::vector<int32_t> words((longest + 3) / 4, 0);
    std::memcpy(words.data(), mine.data(), mine.size());
    auto all = rt::gatherWords(ranks, device, words);
    if (!all)
      return all.status();
    if (!file)
      return rt::Status::ok();
    std::vector<std::string> texts;
    for (int r = 0; r < ranks.size(); ++r)
      texts.emplace_back(reinterpret_cast<const char *>(all->data() + size_t(r) * words.size()),
                         size_t((*lengths)[size_t(r)]));
    if (rt::Status st = file->write(rt::traceDocument(texts)); !st)
      return st;
    return file->close();
  }
};

} // namespace moe::tools

#endif
