//===- CpuStreams.cpp - streams and events of the CPU backend -------------===//
#include "CpuStreams.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace moe::rt::cpu_backend {

namespace {

/// Records are numbered as they are enqueued; a record completes when its
/// stream reaches it; a wait waits for the number current when it was
/// enqueued.
class CpuEvent final : public Event {
public:
  uint64_t enqueueRecord() {
    std::lock_guard<std::mutex> lock(m_);
    return ++recorded_;
  }
  uint64_t latestRecord() {
    std::lock_guard<std::mutex> lock(m_);
    return recorded_;
  }
  void complete(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> lock(m_);
      completed_ = std::max(completed_, ticket);
    }
    done_.notify_all();
  }
  void waitFor(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return completed_ >= ticket; });
  }
  Status synchronize() override {
    waitFor(latestRecord());
    return Status::ok();
  }

private:
  std::mutex m_;
  std::condition_variable done_;
  uint64_t recorded_ = 0, completed_ = 0;
};

CpuEvent &cpuEvent(Event &e) { return static_cast<CpuEvent &>(e); }

/// CPU buffers are host memory: a copy is a memcpy.
Status hostCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset, size_t bytes) {
  std::memcpy(static_cast<uint8_t *>(dst.data()) + dstOffset,
              static_cast<const uint8_t *>(src.data()) + srcOffset, bytes);
  return Status::ok();
}

class CallerStream final : public Stream {
public:
  Status launch(const KernelCall &call) override { return runKernel(call); }
  Status enqueueHost(std::function<Status()> work) override { return work(); }
  Status record(Event &e) override {
    // Everything enqueued before has run.
    cpuEvent(e).complete(cpuEvent(e).enqueueRecord());
    return Status::ok();
  }
  Status wait(Event &e) override {
    cpuEvent(e).waitFor(cpuEvent(e).latestRecord());
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }

protected:
  Status doCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                size_t bytes) override {
    return hostCopy(dst, dstOffset, src, srcOffset, bytes);
  }
};

class WorkerStream final : public Stream {
public:
  explicit WorkerStream(int index) : index_(index), thread_([this] { loop(); }) {}
  ~WorkerStream() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  Status launch(const KernelCall &call) override {
    return enqueue([call] { return runKernel(call); }, false);
  }
  Status enqueueHost(std::function<Status()> work) override {
    return enqueue(std::move(work), false);
  }
  Status record(Event &e) override {
    CpuEvent &event = cpuEvent(e);
    const uint64_t ticket = event.enqueueRecord();
    return enqueue([&event, ticket] {
      event.complete(ticket);
      return Status::ok();
    }, true);
  }
  Status wait(Event &e) override {
    CpuEvent &event = cpuEvent(e);
    const uint64_t ticket = event.latestRecord();
    return enqueue([&event, ticket] {
      event.waitFor(ticket);
      return Status::ok();
    }, true);
  }
  /// Waits until the queue has run; returns (and clears) the first error.
  Status synchronize() override {
    std::unique_lock<std::mutex> lock(m_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
    Status st = std::move(error_);
    error_ = Status::ok();
    return st;
  }

protected:
  Status doCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                size_t bytes) override {
    return enqueue([&dst, dstOffset, &src, srcOffset, bytes] {
      return hostCopy(dst, dstOffset, src, srcOffset, bytes);
    }, false);
  }

private:
  struct Task {
    std::function<Status()> work;
    bool ordering; ///< a record or wait: runs even after an error, so no stream hangs
  };

  Status enqueue(std::function<Status()> work, bool ordering) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back({std::move(work), ordering});
    }
    wake_.notify_one();
    return Status::ok();
  }

  void loop() {
    markStreamWorker();
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, and nothing left
      Task task = std::move(queue_.front());
      queue_.pop_front();
      const bool failed = !error_.isOk();
      busy_ = true;
      lock.unlock();
      Status st = failed && !task.ordering ? Status::ok() : task.work();
      lock.lock();
      busy_ = false;
      if (!st && error_.isOk())
        error_ = Status::error("stream " + std::to_string(index_) + ": " + st.message());
      if (queue_.empty())
        idle_.notify_all();
    }
  }

  int index_;
  std::mutex m_;
  std::condition_variable wake_, idle_;
  std::deque<Task> queue_;
  bool busy_ = false, stop_ = false;
  Status error_ = Status::ok();
  std::thread thread_; // last: starts once the rest is built
};

} // namespace

std::unique_ptr<Event> createEvent() { return std::make_unique<CpuEvent>(); }
std::unique_ptr<Stream> createCallerStream() { return std::make_unique<CallerStream>(); }
std::unique_ptr<Stream> createWorkerStream(int index) {
  return std::make_unique<WorkerStream>(index);
}

} // namespace moe::rt::cpu_backend
