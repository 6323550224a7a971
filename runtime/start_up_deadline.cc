#include "runtime/start_up_deadline.h"

#include <unistd.h>

#include "runtime/log.h"
#include "runtime/process_stops.h"
#include "runtime/str.h"
#include "runtime/world.h"

namespace ddp {

StartUpDeadline::StartUpDeadline(std::chrono::milliseconds limit, std::string limitName,
                                 int exitCode, std::string phase, std::string why)
    : start_(std::chrono::steady_clock::now()),
      limit_(limit),
      limitName_(std::move(limitName)),
      exitCode_(exitCode),
      phase_(std::move(phase)),
      why_(std::move(why)),
      thread_([this] { watch(); }) {}

StartUpDeadline::~StartUpDeadline() {
  disarm();
}

void StartUpDeadline::enter(std::string phase, std::string why) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = std::move(phase);
  why_ = std::move(why);
}

void StartUpDeadline::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  disarmed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StartUpDeadline::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Note [Time the process was stopped]: only time this process ran counts.
  stops::Deadline deadline(limit_ - (std::chrono::steady_clock::now() - start_));
  while (!deadline.passed())
    if (disarmed_.wait_until(lock, deadline.nextLook(), [this] { return done_; })) return;
  const double seconds = std::chrono::duration<double>(limit_).count();
  // Through the log, after the lines before it, and not waiting long for a
  // reader that takes nothing (Note [Output that is not read]): a blocked
  // stderr must not keep this rank from ending. The stuck thread holds the
  // log's lock only while writing to a descriptor that was ready. Then
  // _exit: no destructor may wait for what is stuck.
  log::plain(str("ddp_train: error: on ", thisHostname(), " (rank ", rankFromEnvironment(),
                 ", pid ", ::getpid(), "): start-up: ", phase_, " has not finished after ", seconds,
                 " s (", limitName_, "): ", why_,
                 "; ending this rank so that the launcher ends the job"));
  log::flush(log::kAbortStallLimit);
  ::_exit(exitCode_);
}

}  // namespace ddp
