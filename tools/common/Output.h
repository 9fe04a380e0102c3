//===- Output.h - where a tool's results go ---------------------*- C++ -*-===//
//
// Human-readable text goes to standard output, unless --json - claims it:
// then standard output holds only the JSON document and the text goes to
// standard error. JSON is written with nlohmann-json through the checked
// output path (moe/abi/File.h), so a directory or a FIFO without a
// reader is one line, not a crash or a hang.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_OUTPUT_H
#define MOE_TOOLS_COMMON_OUTPUT_H

#include "moe/abi/File.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace moe::tools {

class Output {
public:
  /// `jsonPath`: the --json argument ("" when absent).
  explicit Output(std::string jsonPath) : jsonPath_(std::move(jsonPath)) {}

  /// Where human-readable output goes.
  std::FILE *text() const { return jsonPath_ == "-" ? stderr : stdout; }
  bool wantsJson() const { return !jsonPath_.empty(); }

  /// Opens the JSON destination early, so that a bad path fails before the
  /// work rather than after it.
  rt::Status open() {
    if (!wantsJson())
      return rt::Status::ok();
    auto file = rt::OutputFile::create(jsonPath_);
    if (!file)
      return file.status();
    file_.emplace(file.take());
    return rt::Status::ok();
  }

  /// Writes `document` (indented, one trailing newline) to the opened file.
  rt::Status writeJson(const nlohmann::json &document) {
    if (!file_)
      return rt::Status::error("internal: --json was not opened");
    // Text a model generated, or a path, need not be UTF-8: such bytes are
    // written as U+FFFD, never an abort.
    if (rt::Status s = file_->write(
            document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        !s)
      return s;
    return file_->close();
  }

private:
  std::string jsonPath_;
  std::optional<rt::OutputFile> file_;
};

/// The p-th percentile of `sorted` (ascending), interpolated linearly
/// between the two nearest ranks as numpy's percentile and median do (and
/// so `vllm bench serve`); 0 if empty.
inline double percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty())
    return 0.0;
  const double rank = p / 100.0 * double(sorted.size() - 1);
  const size_t below = size_t(rank), above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (rank - double(below));
}

} // namespace moe::tools

#endif
