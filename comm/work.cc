#include "comm/work.h"

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"

namespace ddp::comm {

void Work::wait(std::chrono::milliseconds timeout) {
  // Note [Time the process was stopped]: only time this process ran counts.
  stops::Deadline deadline(timeout);
  waitUntil(deadline, timeout);
}

void Work::waitUntil(stops::Deadline& deadline, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  // Every wake looks, the last too: a stop found here is left out of the
  // step's times before the caller measures them.
  while (!deadline.passed() && !completed_)
    done_.wait_until(lock, deadline.nextLook());
  if (!completed_) {
    throw CommTimeoutError(str("rank ", log::processRank(), ": ", description_,
                               " did not complete within ", timeout.count() / 1000.0,
                               " s (a peer rank may have died, stalled or diverged)"));
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::isCompleted() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

ResultChecks Work::resultChecks() const {
  std::lock_guard lock(mutex_);
  return checks_;
}

void Work::setResultChecks(const ResultChecks& checks) {
  std::lock_guard lock(mutex_);
  checks_ = checks;
}

bool Work::hasFailed() const {
  std::lock_guard lock(mutex_);
  return completed_ && error_ != nullptr;
}

Work::TimePoint Work::startedAt() const {
  std::lock_guard lock(mutex_);
  return startedAt_;
}

Work::TimePoint Work::completedAt() const {
  std::lock_guard lock(mutex_);
  return completedAt_;
}

void Work::markStarted() {
  std::lock_guard lock(mutex_);
  startedAt_ = std::chrono::steady_clock::now();
}

void Work::retain(std::shared_ptr<const void> owner) {
  std::lock_guard lock(mutex_);
  if (!completed_) retained_ = std::move(owner);
}

void Work::complete(std::exception_ptr error) {
  std::shared_ptr<const void> released;  // freed outside the lock
  {
    std::lock_guard lock(mutex_);
    if (completed_) return;
    released.swap(retained_);
    completed_ = true;
    completedAt_ = std::chrono::steady_clock::now();
    error_ = std::move(error);
  }
  released.reset();  // before waking waiters: once wait() returns, the buffers are released
  done_.notify_all();
}

}  // namespace ddp::comm
