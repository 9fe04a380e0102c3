//===- Hal.cpp - what the HAL checks for every backend --------------------===//
#include "moe/runtime/Hal.h"

namespace moe::rt {

namespace {
thread_local bool streamWorker = false;
} // namespace

bool onStreamWorker() { return streamWorker; }
void markStreamWorker() { streamWorker = true; }

Status Stream::copy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                    size_t bytes) {
  auto inside = [](size_t offset, size_t n, size_t size) {
    return offset <= size && n <= size - offset;
  };
  if (!inside(dstOffset, bytes, dst.size()) || !inside(srcOffset, bytes, src.size()))
    return Status::error("copy of " + std::to_string(bytes) + " bytes from offset " +
                         std::to_string(srcOffset) + " of a " + std::to_string(src.size()) +
                         "-byte buffer to offset " + std::to_string(dstOffset) + " of a " +
                         std::to_string(dst.size()) + "-byte buffer: out of range");
  return bytes ? doCopy(dst, dstOffset, src, srcOffset, bytes) : Status::ok();
}

} // namespace moe::rt
