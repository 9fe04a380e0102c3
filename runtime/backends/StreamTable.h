//===- StreamTable.h - a device's streams, created on first use --*- C++ -*-===//
#ifndef MOE_RUNTIME_BACKENDS_STREAMTABLE_H
#define MOE_RUNTIME_BACKENDS_STREAMTABLE_H

#include "moe/runtime/Hal.h"

#include <memory>
#include <mutex>
#include <vector>

namespace moe::rt {

/// Stream i of a device, made by `create(i)` when first asked for; safe
/// to call from several threads.
class StreamTable {
public:
  template <typename Create> Stream &get(int index, Create create) {
    std::lock_guard<std::mutex> lock(m_);
    if (streams_.size() <= size_t(index))
      streams_.resize(size_t(index) + 1);
    std::unique_ptr<Stream> &s = streams_[size_t(index)];
    if (!s)
      s = create(index);
    return *s;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(m_);
    streams_.clear();
  }

private:
  std::mutex m_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

} // namespace moe::rt

#endif
