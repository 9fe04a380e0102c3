//===- WeightScan.cpp - page in mapped weight files, checking each weight -===//
#include "WeightScan.h"

#include "moe/abi/WeightChecksum.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace moe::rt {

namespace {

// Linux 5.14; older headers lack it, older kernels answer EINVAL.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/// A worker populates this much per step: a plan waits at most one step
/// when closed early.
constexpr uint64_t kChunk = uint64_t(8) << 20;
/// MADV_WILLNEED runs this far ahead of the chunk being populated.
constexpr uint64_t kReadahead = uint64_t(64) << 20;

/// Reads one byte of every page of [p, p + n): the fallback for kernels
/// without MADV_POPULATE_READ.
void touchPages(const uint8_t *p, size_t n, size_t page) {
  uint8_t sum = 0;
  for (size_t i = 0; i < n; i += page)
    sum ^= static_cast<const volatile uint8_t *>(p)[i];
  static volatile uint8_t sink;
  sink = sum;
}

/// Populates the page tables of [p, p + n); false once the kernel has
/// refused MADV_POPULATE_READ (before 5.14), after which pages are read.
void populate(const uint8_t *p, size_t n, size_t page, bool &populateRead) {
  void *at = const_cast<uint8_t *>(p);
  if (populateRead) {
    int rc = 0;
    for (int tries = 0; tries < 100; ++tries)
      if ((rc = ::madvise(at, n, MADV_POPULATE_READ)) == 0 || (errno != EINTR && errno != EAGAIN))
        break;
    // EINVAL: a kernel before 5.14; read the pages instead. Anything else
    // (EFAULT: the file shrank under the mapping) is left to the reader
    // that meets it (for a verifying scan, the checksum, which then reads
    // the page: a SIGBUS as it would be for a kernel).
    if (rc != 0 && errno == EINVAL)
      populateRead = false;
  }
  if (!populateRead)
    touchPages(p, n, page);
}

/// The checksums of a part's weights, each streamed as its bytes go by.
class WeightChecks {
public:
  WeightChecks(const std::vector<ScanWeight> &weights, plan::WeightChecksum algorithm)
      : weights_(weights), algorithm_(algorithm), hashers_(weights.size()),
        done_(weights.size()) {}

  /// Feeds bytes [lo, hi) of the file at `data` to the weights that hold
  /// them, and checks those that end by `hi` (adding their bytes to
  /// `verified`). Returns the first whose checksum differs.
  std::optional<uint32_t> hash(const uint8_t *data, uint64_t lo, uint64_t hi,
                               uint64_t &verified) {
    for (size_t i = first_; i < weights_.size() && weights_[i].offset < hi; ++i) {
      if (done_[i])
        continue; // an earlier weight overlapped this one and ran longer
      const ScanWeight &w = weights_[i];
      const uint64_t from = std::max(w.offset, lo), to = std::min(w.offset + w.size, hi);
      if (!hashers_[i])
        hashers_[i].emplace(algorithm_);
      if (from < to)
        hashers_[i]->update(data + from, to - from);
      if (w.offset + w.size <= hi)
        if (auto bad = check(i, verified))
          return bad;
    }
    while (first_ < weights_.size() && done_[first_])
      ++first_;
    return std::nullopt;
  }

  /// Checks the weights not yet checked: empty ones at the part's end.
  std::optional<uint32_t> finish(uint64_t &verified) {
    for (size_t i = first_; i < weights_.size(); ++i)
      if (!done_[i]) {
        if (!hashers_[i])
          hashers_[i].emplace(algorithm_);
        if (auto bad = check(i, verified))
          return bad;
      }
    return std::nullopt;
  }

private:
  std::optional<uint32_t> check(size_t i, uint64_t &verified) {
    done_[i] = true;
    const bool ok = hashers_[i]->value() == weights_[i].checksum;
    hashers_[i].reset();
    if (!ok)
      return weights_[i].tensor;
    verified += weights_[i].size;
    return std::nullopt;
  }

  const std::vector<ScanWeight> &weights_;
  plan::WeightChecksum algorithm_;
  std::vector<std::optional<WeightHasher>> hashers_; ///< of weights begun, not yet checked
  std::vector<bool> done_;
  size_t first_ = 0; ///< every weight before it is checked
};

} // namespace

ScanPlan planScan(const plan::Plan &plan, std::vector<ScanFile> files, bool verify,
                  int workers) {
  ScanPlan scan;
  // Each mapped file's weights, by offset.
  std::vector<std::vector<ScanWeight>> weights(files.size());
  if (verify)
    for (uint32_t id = 0; id < plan.tensors()->size(); ++id) {
      const plan::Tensor *t = plan.tensors()->Get(id);
      if (t->storage() == plan::Storage::Weight && files[t->weight_file()].data)
        weights[t->weight_file()].push_back({id, t->offset(), t->size(), t->checksum()});
    }
  for (auto &list : weights)
    std::stable_sort(list.begin(), list.end(), [](const ScanWeight &a, const ScanWeight &b) {
      return a.offset < b.offset;
    });

  // The mapped files end to end; a cut may fall at a file's start or at a
  // weight's start that no earlier weight straddles.
  std::vector<uint64_t> start(files.size()), allowed;
  uint64_t total = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    start[f] = total;
    if (!files[f].data)
      continue;
    allowed.push_back(total);
    uint64_t reach = 0;
    for (const ScanWeight &w : weights[f]) {
      if (w.offset >= reach && w.offset < files[f].size)
        allowed.push_back(total + w.offset);
      reach = std::max(reach, w.offset + w.size);
    }
    total += files[f].size;
  }
  allowed.push_back(total);
  // Worker k's bytes end at the allowed cut nearest to (k + 1) / workers of
  // the total.
  std::vector<uint64_t> cuts = {0};
  for (int k = 1; k < workers; ++k) {
    const uint64_t target = total / uint64_t(workers) * uint64_t(k);
    auto above = std::lower_bound(allowed.begin(), allowed.end(), target);
    uint64_t cut = *above;
    if (above != allowed.begin() && target - *(above - 1) < *above - target)
      cut = *(above - 1);
    if (cut > cuts.back() && cut < total)
      cuts.push_back(cut);
  }
  cuts.push_back(total);

  for (size_t k = 0; k + 1 < cuts.size() && total > 0; ++k) {
    std::vector<ScanPart> &list = scan.workers.emplace_back();
    for (uint32_t f = 0; f < files.size(); ++f) {
      const uint64_t size = files[f].size;
      if (!files[f].data || start[f] + size <= cuts[k] || start[f] >= cuts[k + 1])
        continue;
      ScanPart part;
      part.file = f;
      part.begin = std::max(cuts[k], start[f]) - start[f];
      part.end = std::min(cuts[k + 1], start[f] + size) - start[f];
      // An empty weight at the end of its file is the file's last part's.
      for (const ScanWeight &w : weights[f])
        if (w.offset >= part.begin &&
            (w.offset < part.end || (w.offset == size && part.end == size)))
          part.weights.push_back(w);
      for (const ScanWeight &w : part.weights)
        scan.weightBytes += w.size;
      list.push_back(std::move(part));
    }
  }
  scan.bytes = total;
  scan.files = std::move(files);
  return scan;
}

ScanEnd scanParts(const ScanPlan &scan, size_t worker, plan::WeightChecksum algorithm,
                  std::atomic<bool> &stop, const std::function<void(const ScanStep &)> &report) {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  bool populateRead = true;
  for (const ScanPart &part : scan.workers[worker]) {
    const ScanFile &file = scan.files[part.file];
    // Pages are populated over [from, to), page-aligned as madvise needs:
    // the page that holds a cut is the later part's.
    const uint64_t from = part.begin / page * page;
    const uint64_t to = part.end == file.size ? file.size : part.end / page * page;
    WeightChecks checks(part.weights, algorithm);
    uint64_t ahead = from, hashed = part.begin;
    uint64_t at = from;
    do {
      if (stop.load(std::memory_order_relaxed))
        return {ScanEnd::Kind::Stopped};
      const uint64_t n = std::min(kChunk, to - at);
      if (ahead < std::min(to, at + kReadahead)) {
        // Readahead of the next chunks while this one is populated.
        const uint64_t end = std::min(to, at + 2 * kReadahead);
        (void)::madvise(const_cast<uint8_t *>(file.data) + ahead, end - ahead, MADV_WILLNEED);
        ahead = end;
      }
      if (n)
        populate(file.data + at, n, page, populateRead);
      // The part's last step hashes to its end (the rest of its last page
      // comes in as the checksum reads it).
      const uint64_t hashTo = std::max(hashed, at + n == to ? part.end : at + n);
      ScanStep step{n, 0, populateRead};
      if (auto bad = checks.hash(file.data, hashed, hashTo, step.verified)) {
        stop.store(true, std::memory_order_relaxed);
        return {ScanEnd::Kind::Mismatch, *bad};
      }
      hashed = hashTo;
      at += n;
      report(step);
    } while (at < to);
    ScanStep last{0, 0, populateRead};
    if (auto bad = checks.finish(last.verified)) {
      stop.store(true, std::memory_order_relaxed);
      return {ScanEnd::Kind::Mismatch, *bad};
    }
    if (last.verified)
      report(last);
  }
  return {};
}

} // namespace moe::rt
