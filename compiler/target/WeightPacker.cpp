//===- WeightPacker.cpp - stream checkpoint tensors into a weight file ----===//
#include "compiler/target/WeightPacker.h"
#include "moe/runtime/Checksum.h"
#include "moe/runtime/PlanFormat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace moe {

namespace {
constexpr size_t kBufferBytes = 16u << 20;
} // namespace

WeightPacker::WeightPacker(const std::string &path, uint64_t totalBytes)
    : path_(path), total_(totalBytes), tty_(::isatty(2)), buffer_(kBufferBytes) {
  out_ = std::fopen(path.c_str(), "wb");
  if (!out_)
    throw InputError(path + ": cannot create (" + std::strerror(errno) + ")");
}

WeightPacker::~WeightPacker() {
  if (out_)
    std::fclose(out_);
}

WeightPacker::Packed WeightPacker::append(const std::vector<const TensorInfo *> &parts) {
  static const char zeros[rt::kWeightAlignment] = {};
  uint64_t pad = (rt::kWeightAlignment - written_ % rt::kWeightAlignment) %
                 rt::kWeightAlignment;
  if (pad && std::fwrite(zeros, 1, pad, out_) != pad)
    throw InputError(path_ + ": write failed (" + std::strerror(errno) + ")");
  written_ += pad;
  Packed packed;
  packed.offset = written_;
  rt::Checksum64 sum;
  for (const TensorInfo *part : parts) {
    int fd = ::open(part->file.c_str(), O_RDONLY);
    if (fd < 0)
      throw InputError(part->file + ": cannot open (" + std::strerror(errno) + ")");
    uint64_t done = 0;
    while (done < part->size) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(buffer_.size(),
                                                            part->size - done));
      ssize_t got = ::pread(fd, buffer_.data(), chunk, off_t(part->offset + done));
      if (got <= 0) {
        ::close(fd);
        throw InputError(part->file + ": short read at byte " +
                         std::to_string(part->offset + done) + " (file truncated?)");
      }
      sum.update(buffer_.data(), size_t(got));
      if (std::fwrite(buffer_.data(), 1, size_t(got), out_) != size_t(got)) {
        ::close(fd);
        throw InputError(path_ + ": write failed (" + std::strerror(errno) + ")");
      }
      done += uint64_t(got);
      written_ += uint64_t(got);
      progress(false);
    }
    ::close(fd);
  }
  packed.size = written_ - packed.offset;
  packed.checksum = sum.value();
  ++tensors_;
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
