// Work: the handle of one asynchronous collective.
//
// A Communicator returns a Work for every call. The caller keeps the buffer
// alive and untouched until wait() returns, or hands its owner to retain();
// the backend completes the Work from its own thread. wait() rethrows
// whatever error the collective stored (CommError, with the call and rank),
// so a failure surfaces on the thread that asked for the result, not on the
// communication thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/process_stops.h"

namespace ddp::comm {

// What a backend learnt of an all-reduce's result where it already touched
// it (comm/finite.h), the same on every rank; each empty where it did not
// look.
struct ResultChecks {
  // Floating types: whether the result holds a NaN or an infinity (Note
  // [Non-finite check while reducing]).
  std::optional<bool> nonFinite;
  // float32, with CommOptions::sumOfSquares: the sum of the squares of the
  // result (Note [Sum of squares while reducing]).
  std::optional<double> sumOfSquares;
};

class Work {
 public:
  // `description` names the collective for error reports, e.g.
  // "allreduce #12 (float32 x 1048576, avg)".
  explicit Work(std::string description) : description_(std::move(description)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the collective completes or `timeout` passes. Rethrows the
  // collective's error; throws CommTimeoutError naming the collective on
  // timeout (the collective may still be running: the job must then abort,
  // since the buffer is still in use). Any thread may call it. A device
  // backend (NCCL) overrides it to watch the collective itself (Note [Host
  // wait on a device collective] in comm/nccl/nccl_communicator.h).
  virtual void wait(std::chrono::milliseconds timeout);

  // Makes the result visible to whatever the caller does next, as cheaply as
  // the backend can. Host backends (MPI): the same as wait(). Device backends
  // (NCCL): the caller's compute stream waits for the collective and the host
  // does not block (Note [NCCL stream ordering] in comm/nccl); a hang is then
  // caught by the backend's watchdog instead of `timeout`. Rethrows a stored
  // error, as wait() does.
  virtual void synchronize(std::chrono::milliseconds timeout) { wait(timeout); }

  // True once the collective finished (successfully or not). Never blocks.
  bool isCompleted() const;
  // True once the collective finished with an error (or timed out in the backend).
  bool hasFailed() const;

  const std::string& description() const { return description_; }

  // When the backend started and finished the collective (default-constructed
  // until then). For traces and for tests that prove overlap by ordering.
  using TimePoint = std::chrono::steady_clock::time_point;
  TimePoint startedAt() const;
  TimePoint completedAt() const;

  // What the backend learnt of an all-reduce's result while reducing
  // (ResultChecks). Valid once wait() returned.
  ResultChecks resultChecks() const;

  // Keeps `owner` (the collective's buffer) alive until the collective
  // completes; nothing if it already has. For an owner that goes away
  // without waiting: a timeout unwinds the stack while the backend may still
  // write into the buffer, and the job is about to end, so the buffer
  // outlives its user instead of anyone blocking on the collective again.
  // One owner per Work (a second call replaces the first). Any thread.
  void retain(std::shared_ptr<const void> owner);

  // Backend side, before complete(): records the checks above.
  void setResultChecks(const ResultChecks& checks);
  // Backend side, from the backend's thread: the collective starts running.
  void markStarted();
  // Backend side: marks the collective done, storing `error` if it failed.
  // The first call counts and later ones do nothing: a device backend's
  // watchdog may see a collective finish that a waiter already completed.
  void complete(std::exception_ptr error = nullptr);

 protected:
  // wait(timeout) on a deadline the caller started: for an override that
  // watched the collective itself for part of `timeout` and waits here for
  // the rest, so that a timeout names the whole of it, not what was left.
  void waitUntil(stops::Deadline& deadline, std::chrono::milliseconds timeout);

 private:
  const std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  ResultChecks checks_;
  std::shared_ptr<const void> retained_;  // released by complete()
  TimePoint startedAt_{};
  TimePoint completedAt_{};
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace ddp::comm
