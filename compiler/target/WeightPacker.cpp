//===- WeightPacker.cpp - stream checkpoint tensors into a weight file ----===//
#include "compiler/target/WeightPacker.h"
#include "compiler/import/PackedInt4.h"
#include "moe/abi/File.h"
#include "moe/abi/KernelCall.h"
#include "moe/abi/WeightChecksum.h"
#include "moe/abi/PlanFormat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <map>

namespace moe {

namespace {
constexpr size_t kBufferBytes = 16u << 20;
} // namespace

WeightPacker::WeightPacker(const std::string &path, uint64_t totalBytes,
                           const std::atomic<bool> *cancelled)
    : path_(path), total_(totalBytes), tty_(::isatty(2)), cancelled_(cancelled),
      buffer_(kBufferBytes) {
  out_ = std::fopen(path.c_str(), "wb");
  if (!out_)
    throw InputError(path + ": cannot create (" + std::strerror(errno) + ")");
}

WeightPacker::~WeightPacker() {
  if (out_)
    std::fclose(out_);
}

void WeightPacker::begin(Packed &packed) {
  static const char zeros[rt::kWeightAlignment] = {};
  uint64_t pad = (rt::kWeightAlignment - written_ % rt::kWeightAlignment) %
                 rt::kWeightAlignment;
  if (pad && std::fwrite(zeros, 1, pad, out_) != pad)
    throw InputError(path_ + ": write failed (" + std::strerror(errno) + ")");
  written_ += pad;
  packed.offset = written_;
}

void WeightPacker::write(const char *data, size_t bytes, rt::WeightHasher &sum) {
  if (cancelled_ && *cancelled_)
    throw InputError(path_ + ": interrupted");
  sum.update(data, bytes);
  if (std::fwrite(data, 1, bytes, out_) != bytes)
    throw InputError(path_ + ": write failed (" + std::strerror(errno) + ")");
  written_ += bytes;
  progress(false);
}

void WeightPacker::end(Packed &packed, const rt::WeightHasher &sum) {
  packed.size = written_ - packed.offset;
  packed.checksum = sum.value();
  ++tensors_;
}

// Calls `consume(data, bytes)` for consecutive pieces of a part, each a
// multiple of `unit` bytes (except a short file, which throws).
template <typename Consume>
void WeightPacker::read(const TensorInfo &part, size_t unit, Consume consume) {
  auto in = rt::InputFile::open(part.file);
  if (!in)
    throw InputError(in.status().message());
  const size_t piece = std::max(unit, buffer_.size() / unit * unit);
  if (buffer_.size() < piece)
    buffer_.resize(piece);
  if (part.rowPitch) {
    // Some columns of each row: whole rows are read in one piece (one
    // read, not one per row), then each row's columns moved to the front.
    const size_t rowBytes = size_t(part.size / uint64_t(part.shape.at(0)));
    const size_t pitch = size_t(part.rowPitch);
    const size_t perPiece = std::max<size_t>(1, buffer_.size() / pitch);
    if (buffer_.size() < pitch)
      buffer_.resize(pitch);
    for (int64_t row = 0; row < part.shape[0];) {
      const int64_t n = std::min<int64_t>(int64_t(perPiece), part.shape[0] - row);
      if (rt::Status st = in->readAt(part.offset + uint64_t(row) * pitch, buffer_.data(),
                                     size_t(n - 1) * pitch + rowBytes);
          !st)
        throw InputError(st.message());
      for (int64_t i = 1; i < n; ++i)
        std::memmove(buffer_.data() + size_t(i) * rowBytes, buffer_.data() + size_t(i) * pitch,
                     rowBytes);
      consume(buffer_.data(), size_t(n) * rowBytes);
      row += n;
    }
    return;
  }
  for (uint64_t done = 0; done < part.size;) {
    size_t want = size_t(std::min<uint64_t>(piece, part.size - done));
    if (rt::Status st = in->readAt(part.offset + done, buffer_.data(), want); !st)
      throw InputError(st.message());
    consume(buffer_.data(), want);
    done += want;
  }
}

namespace {
// Rows r = 0 .. kPanelRows - 1 of `src` (rows of `cols` elements) as one
// panel at dst.
template <typename T> void interleave(const char *src, int64_t cols, char *dst) {
  const T *from = reinterpret_cast<const T *>(src);
  T *to = reinterpret_cast<T *>(dst);
  for (int64_t r = 0; r < rt::kPanelRows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      to[rt::panelIndex(r, c, cols)] = from[r * cols + c];
}
} // namespace

void WeightPacker::writePanels(PanelRows &rows, const char *data, size_t bytes,
                               rt::WeightHasher &sum) {
  rows.held.insert(rows.held.end(), data, data + bytes);
  const size_t panelBytes = size_t(rt::kPanelRows) * rows.rowBytes;
  const int64_t cols = int64_t(rows.rowBytes / rows.elementBytes);
  rows.panel.resize(panelBytes);
  size_t done = 0;
  for (; done + panelBytes <= rows.held.size(); done += panelBytes) {
    const char *src = rows.held.data() + done;
    if (rows.elementBytes == 4)
      interleave<uint32_t>(src, cols, rows.panel.data());
    else
      interleave<uint16_t>(src, cols, rows.panel.data());
    write(rows.panel.data(), panelBytes, sum);
  }
  rows.held.erase(rows.held.begin(), rows.held.begin() + std::ptrdiff_t(done));
}

void WeightPacker::endPanels(const PanelRows &rows) {
  if (!rows.held.empty())
    throw InputError(path_ + ": a weight in panels of " + std::to_string(rt::kPanelRows) +
                     " rows ends " + std::to_string(rows.held.size() / rows.rowBytes) +
                     " rows into a panel");
}

WeightPacker::Packed WeightPacker::append(const std::vector<const TensorInfo *> &parts,
                                          int64_t panelCols) {
  Packed packed;
  begin(packed);
  rt::WeightHasher sum(rt::kWeightChecksum);
  PanelRows panels;
  for (const TensorInfo *part : parts) {
    if (!panelCols) {
      read(*part, 1, [&](const char *data, size_t bytes) { write(data, bytes, sum); });
      continue;
    }
    panels.elementBytes = dtypeSize(part->dtype);
    if (panels.elementBytes != 2 && panels.elementBytes != 4)
      throw InputError(part->file + ": a " + part->dtype + " tensor cannot be stored in panels");
    panels.rowBytes = size_t(panelCols) * panels.elementBytes;
    read(*part, panels.rowBytes,
         [&](const char *data, size_t bytes) { writePanels(panels, data, bytes, sum); });
  }
  endPanels(panels);
  end(packed, sum);
  return packed;
}

WeightPacker::Packed WeightPacker::appendEncoded(const std::vector<const TensorInfo *> &parts,
                                                 const Encoding &e, std::vector<float> &scales) {
  Packed packed;
  begin(packed);
  rt::WeightHasher sum(rt::kWeightChecksum);
  // Rows wait in `rows` until a whole block of e.rowGroup has come (blocks
  // may span parts, e.g. two experts).
  std::vector<float> rows;
  std::vector<char> encoded;
  PanelRows panels;
  if (e.panels) {
    if (e.dtype != plan::DType::F32 && e.dtype != plan::DType::BF16)
      throw InputError(path_ + ": only F32, BF16 and F16 weights can be stored in panels");
    panels.elementBytes = e.dtype == plan::DType::F32 ? 4 : 2;
    panels.rowBytes = size_t(e.cols) * panels.elementBytes;
  }
  auto flush = [&](int64_t count) {
    encoded.clear();
    encodeRows(e, rows.data(), count, encoded, scales);
    if (e.panels)
      writePanels(panels, encoded.data(), encoded.size(), sum);
    else
      write(encoded.data(), encoded.size(), sum);
    rows.erase(rows.begin(), rows.begin() + count * e.cols);
  };
  for (const TensorInfo *part : parts) {
    const size_t rowBytes = size_t(e.cols) * dtypeSize(part->dtype);
    read(*part, rowBytes, [&](const char *data, size_t bytes) {
      const size_t have = rows.size(), count = bytes / rowBytes;
      rows.resize(have + count * size_t(e.cols));
      decodeElements(part->dtype, data, uint64_t(count) * uint64_t(e.cols), rows.data() + have);
      const int64_t ready = int64_t(rows.size()) / e.cols / e.rowGroup * e.rowGroup;
      if (ready > 0)
        flush(ready);
    });
  }
  if (!rows.empty())
    flush(int64_t(rows.size()) / e.cols);
  endPanels(panels);
  end(packed, sum);
  return packed;
}

WeightPacker::Packed WeightPacker::appendPackedInt4(const std::vector<const TensorInfo *> &parts,
                                                    std::vector<float> &scales) {
  Packed packed;
  begin(packed);
  rt::WeightHasher sum(rt::kWeightChecksum);
  std::vector<char> nibbles;
  for (const TensorInfo *part : parts) {
    nibbles.clear();
    readPackedInt4(*part, nibbles, scales);
    write(nibbles.data(), nibbles.size(), sum);
  }
  end(packed, sum);
  return packed;
}

void WeightPacker::decode(const TensorInfo &part, std::vector<float> &out) {
  const size_t unit = dtypeSize(part.dtype);
  read(part, unit, [&](const char *data, size_t bytes) {
    const size_t have = out.size();
    out.resize(have + bytes / unit);
    decodeElements(part.dtype, data, bytes / unit, out.data() + have);
  });
}

WeightPacker::Packed WeightPacker::appendBytes(const void *data, size_t bytes) {
  Packed packed;
  begin(packed);
  rt::WeightHasher sum(rt::kWeightChecksum);
  write(static_cast<const char *>(data), bytes, sum);
  end(packed, sum);
  return packed;
}

uint64_t WeightPacker::finish() {
  progress(true);
  if (std::fclose(out_) != 0) {
    out_ = nullptr;
    throw InputError(path_ + ": write failed (" + std::strerror(errno) + ")");
  }
  out_ = nullptr;
  return written_;
}

void WeightPacker::progress(bool last) {
  if (!tty_ || (!last && written_ - shown_ < (64u << 20)))
    return;
  shown_ = written_;
  std::fprintf(stderr, "\rpacking weights: %llu tensors, %.2f / %.2f GiB%s",
               static_cast<unsigned long long>(tensors_), written_ / 1073741824.0,
               total_ / 1073741824.0, last ? "\n" : "");
}

} // namespace moe
