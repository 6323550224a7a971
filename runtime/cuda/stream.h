// RAII owners for CUDA streams and events.
//
// Destructors never throw: a failure to destroy is ignored (the process is
// usually ending, and there is nothing a caller could do about it).
#pragma once

#include <cuda_runtime.h>

namespace ddp::cuda {

// A non-blocking stream: it never synchronises implicitly with the legacy
// default stream, so ordering against other streams is always explicit
// (events), never accidental.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Blocks the calling thread until everything issued on the stream ran.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (cheaper to record and wait on).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  // Captures the work issued on `stream` so far.
  void record(cudaStream_t stream);
  // Work issued on `stream` after this call waits for the recorded work;
  // the host does not block.
  void makeWait(cudaStream_t stream) const;
  // True once the recorded work has run (or nothing was recorded).
  // Throws DeviceError if the device reported an error.
  bool query() const;
  // Blocks the host until the recorded work has run.
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace ddp::cuda
