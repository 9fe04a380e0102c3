//===- CudaStreams.cpp - streams and events of the CUDA backend -----------===//
#include "CudaStreams.h"
#include "CudaError.h"
#include "CudaKernels.h"

#include <cstdint>
#include <mutex>
#include <string>

namespace moe::rt::cuda_backend {

namespace {

/// An event that could not be created holds why: every use returns it.
class CudaEvent final : public Event {
public:
  CudaEvent()
      : created_(check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                       "cudaEventCreateWithFlags")) {}
  ~CudaEvent() override {
    if (event_)
      (void)cudaEventDestroy(event_);
  }
  Status synchronize() override {
    if (!created_)
      return created_;
    return check(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }
  /// The event, or why there is none.
  Expected<cudaEvent_t> get() const {
    if (!created_)
      return created_;
    return event_;
  }

private:
  cudaEvent_t event_ = nullptr;
  Status created_;
};

class CudaStream final : public Stream {
public:
  explicit CudaStream(int index)
      : index_(index), created_(check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                      "cudaStreamCreateWithFlags")) {}
  ~CudaStream() override {
    if (stream_) {
      // Host work still queued refers to this stream.
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }

  Status launch(const KernelCall &call) override {
    if (!created_)
      return created_;
    if (failed())
      return Status::ok(); // skipped: synchronize() reports the failure
    return launchKernel(call, stream_);
  }

  Status enqueueHost(std::function<Status()> work) override {
    if (!created_)
      return created_;
    if (index_ == 0) { // the caller's stream: the work runs here, in order
      if (Status st = synchronize(); !st)
        return st;
      return work();
    }
    auto *job = new HostJob{std::move(work), this};
    if (Status st = check(cudaLaunchHostFunc(stream_, &runHostJob, job), "cudaLaunchHostFunc");
        !st) {
      delete job;
      return st;
    }
    return Status::ok();
  }

  Status record(Event &e) override {
    return withEvent(e, [&](cudaEvent_t event) {
      return check(cudaEventRecord(event, stream_), "cudaEventRecord");
    });
  }

  Status wait(Event &e) override {
    return withEvent(e, [&](cudaEvent_t event) {
      return check(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
    });
  }

  /// Waits for the stream; returns (and clears) its first error.
  Status synchronize() override {
    if (!created_)
      return created_;
    Status done = check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    std::lock_guard<std::mutex> lock(m_);
    Status held = std::move(error_);
    error_ = Status::ok();
    return held ? std::move(done) : std::move(held);
  }

protected:
  Status doCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                size_t bytes) override {
    if (!created_)
      return created_;
    if (failed())
      return Status::ok();
    // Every buffer of this device has a device address (pinned host memory
    // is mapped), so the runtime tells the direction from the addresses.
    return check(cudaMemcpyAsync(static_cast<uint8_t *>(dst.data()) + dstOffset,
                                 static_cast<const uint8_t *>(src.data()) + srcOffset, bytes,
                                 cudaMemcpyDefault, stream_),
                 "cudaMemcpyAsync");
  }

private:
  struct HostJob {
    std::function<Status()> work;
    CudaStream *stream;
  };

  static void CUDART_CB runHostJob(void *p) {
    std::unique_ptr<HostJob> job(static_cast<HostJob *>(p));
    if (job->stream->failed())
      return;
    if (Status st = job->work(); !st)
      job->stream->fail(st);
  }

  /// op(e's event), unless the event or this stream could not be created.
  template <typename Op> Status withEvent(Event &e, Op op) {
    auto event = static_cast<CudaEvent &>(e).get();
    if (!event)
      return event.status();
    if (!created_)
      return created_;
    return op(*event);
  }

  bool failed() {
    std::lock_guard<std::mutex> lock(m_);
    return !error_;
  }
  void fail(const Status &st) {
    std::lock_guard<std::mutex> lock(m_);
    if (error_)
      error_ = Status::error("stream " + std::to_string(index_) + ": " + st.message());
  }

  int index_;
  cudaStream_t stream_ = nullptr;
  Status created_;
  std::mutex m_;
  Status error_ = Status::ok(); ///< the first failure of host work since synchronize()
};

} // namespace

std::unique_ptr<Event> createEvent() { return std::make_unique<CudaEvent>(); }
std::unique_ptr<Stream> createStream(int index) { return std::make_unique<CudaStream>(index); }

} // namespace moe::rt::cuda_backend
