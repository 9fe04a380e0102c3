//===- WeightScan.h - page in mapped weight files, checking each weight -*- C++ -*-===//
//
// The work of LoadedPlan's prefault (Plan.h, Prefault): the page tables of
// the mapped weight files are populated chunk by chunk, readahead running
// ahead; when verifying, each weight's bytes go through its checksum right
// after their chunk is populated, while they are in the page cache.
//
// Checking reads every byte, which a prefault alone never does: a prefault
// from disk waits for the disk, one over a hot page cache only fills page
// tables, while a checksum reads the bytes at memory speed. So a verifying
// scan is cut into parts for two workers, each of which populates and
// hashes its own part: one hashes while the other waits for the disk, and
// over a hot cache both cores hash (docs/robustness.md, "Weights verified
// as they are paged in", has the figures).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_WEIGHTSCAN_H
#define MOE_RUNTIME_WEIGHTSCAN_H

#include "abi/schema/plan_generated.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace moe::rt {

/// A weight file as mapped; data is null for one that is not (another
/// rank's, or empty): it is not scanned.
struct ScanFile {
  const uint8_t *data = nullptr;
  uint64_t size = 0;
};

/// A weight to check: its tensor and bytes, and the checksum they must have.
struct ScanWeight {
  uint32_t tensor = 0;
  uint64_t offset = 0, size = 0, checksum = 0;
};

/// Bytes [begin, end) of file `file`, and the weights that start in them
/// (by offset; none straddles `end`). One worker scans a list of parts.
struct ScanPart {
  uint32_t file = 0;
  uint64_t begin = 0, end = 0;
  std::vector<ScanWeight> weights;
};

/// The work of one prefault: the files, cut into a list of parts for each
/// worker.
struct ScanPlan {
  std::vector<ScanFile> files;
  std::vector<std::vector<ScanPart>> workers;
  uint64_t bytes = 0;       ///< mapped bytes (to populate)
  uint64_t weightBytes = 0; ///< bytes of the weights listed (to check)
};

/// Cuts the mapped `files` into at most `workers` lists of parts of about
/// equal bytes, in file order, where no weight straddles a cut. Without
/// `verify`, no weights are listed and the files are one list.
ScanPlan planScan(const plan::Plan &plan, std::vector<ScanFile> files, bool verify,
                  int workers);

/// What a worker has done since it last reported (after each chunk).
struct ScanStep {
  uint64_t populated = 0; ///< bytes whose page tables were populated
  uint64_t verified = 0;  ///< bytes of weights whose checksums matched
  /// Pages were populated with MADV_POPULATE_READ (false: one read per page,
  /// kernels before 5.14).
  bool populateRead = true;
};

/// How a worker's scan ended.
struct ScanEnd {
  enum class Kind { Done, Stopped, Mismatch } kind = Kind::Done;
  uint32_t tensor = 0; ///< Mismatch: the weight whose checksum differs
};

/// Populates (and checks, when its parts list weights) worker `worker`'s
/// parts in order, calling `report` after every chunk, until done, until
/// `stop` is set (checked before each chunk), or until a checksum differs:
/// it then sets `stop`, so that the other workers end too. `algorithm` is
/// the plan's weight checksum (one weightChecksumName knows).
ScanEnd scanParts(const ScanPlan &scan, size_t worker, plan::WeightChecksum algorithm,
                  std::atomic<bool> &stop, const std::function<void(const ScanStep &)> &report);

} // namespace moe::rt

#endif
