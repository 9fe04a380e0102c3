//===- WeightPacker.h - stream checkpoint tensors into a weight file -*- C++ -*-===//
//
// Copies tensors from safetensors files into one plan weight file, tensor by
// tensor through a fixed-size buffer (never the whole checkpoint in memory),
// each 64-byte aligned, with a checksum per tensor. Shows progress on a
// terminal. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TARGET_WEIGHTPACKER_H
#define MOE_COMPILER_TARGET_WEIGHTPACKER_H

#include "compiler/import/Safetensors.h"
#include "compiler/target/WeightEncoding.h"
#include "moe/abi/WeightChecksum.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace moe {

class WeightPacker {
public:
  /// Opens `path` for writing; `totalBytes` (for progress) may be 0. When
  /// `*cancelled` becomes true, the next write throws InputError.
  WeightPacker(const std::string &path, uint64_t totalBytes,
               const std::atomic<bool> *cancelled = nullptr);
  ~WeightPacker();

  struct Packed {
    uint64_t offset = 0, size = 0, checksum = 0;
  };
  /// Appends the concatenation of `parts` (e.g. the per-expert tensors of
  /// one stacked weight) as one tensor; with `panelCols` > 0, their rows of
  /// that many elements in panels (rt::panelIndex over the concatenated
  /// rows: a panel may span pieces and parts). Throws InputError on I/O
  /// failure, or when the rows do not fill whole panels.
  Packed append(const std::vector<const TensorInfo *> &parts, int64_t panelCols = 0);
  /// As append, converting rows of `e.cols` elements to `e` (parts of a
  /// dtype canDecode accepts), in panels when `e.panels` (F32, BF16); I8/I4
  /// scales are appended to `scales`.
  Packed appendEncoded(const std::vector<const TensorInfo *> &parts, const Encoding &e,
                       std::vector<float> &scales);
  /// Appends GPTQ/AWQ layer views (PackedInt4.h) as one int4 or int8
  /// tensor, their values exactly; their scales are appended to `scales`.
  Packed appendPackedInt4(const std::vector<const TensorInfo *> &parts,
                          std::vector<float> &scales);
  /// Appends the elements of `part` (a dtype canDecode accepts) as f32 to
  /// `out` (e.g. an fp8 checkpoint's block scales).
  void decode(const TensorInfo &part, std::vector<float> &out);
  /// Appends `bytes` bytes (e.g. the scales of an encoded weight).
  Packed appendBytes(const void *data, size_t bytes);
  /// Flushes and closes; returns the file size. Throws InputError.
  uint64_t finish();

private:
  void begin(Packed &packed); // pads to the alignment; the tensor starts here
  void write(const char *data, size_t bytes, rt::WeightHasher &sum);
  void end(Packed &packed, const rt::WeightHasher &sum);
  /// Rows on their way into panels: those of an unfinished panel wait in
  /// `held`.
  struct PanelRows {
    size_t rowBytes = 0, elementBytes = 0;
    std::vector<char> held, panel;
  };
  void writePanels(PanelRows &rows, const char *data, size_t bytes, rt::WeightHasher &sum);
  void endPanels(const PanelRows &rows);
  template <typename Consume> void read(const TensorInfo &part, size_t unit, Consume consume);
  void progress(bool last);

  std::string path_;
  std::FILE *out_ = nullptr;
  uint64_t written_ = 0, total_ = 0, tensors_ = 0, shown_ = 0;
  bool tty_ = false;
  const std::atomic<bool> *cancelled_;
  std::vector<char> buffer_;
};

} // namespace moe

#endif
