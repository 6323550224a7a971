#include "comm/activity.h"

#include "runtime/process_stops.h"

namespace ddp::comm {
namespace {

// Note [Time the process was stopped]: the watchdog's limits count only
// time this process ran.
double secondsSince(std::chrono::steady_clock::time_point start) {
  return stops::runningSecondsSince(start);
}

}  // namespace

void ActivityLog::setContext(const std::string& context) {
  issuer_.store(currentThreadId(), std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  context_ = context;
  contextSetAt_ = std::chrono::steady_clock::now();
}

void ActivityLog::issued(std::uint64_t sequence, std::string what, std::string context,
                         const WorkPtr& work) {
  issuer_.store(currentThreadId(), std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  prune();
  issued_ = sequence + 1;
  pending_.push_back(
      Entry{sequence, std::move(what), std::move(context), std::chrono::steady_clock::now(), work});
}

void ActivityLog::prune() const {
  while (!pending_.empty()) {
    const Work& work = *pending_.front().work;
    // A failed collective stays: this rank never got past it.
    if (!work.isCompleted() || work.hasFailed()) return;
    lastCompleted_ = work.completedAt();
    pending_.pop_front();
  }
}

ChannelActivity ActivityLog::snapshot() const {
  std::lock_guard lock(mutex_);
  prune();
  ChannelActivity activity;
  activity.channel = channel_;
  activity.issued = issued_;
  activity.context = context_;
  activity.contextSeconds = secondsSince(contextSetAt_);
  if (pending_.empty()) {
    activity.idleSeconds = secondsSince(lastCompleted_);
  } else {
    const Entry& oldest = pending_.front();
    activity.oldestPending = PendingCollective{oldest.sequence, oldest.what, oldest.context,
                                               secondsSince(oldest.issuedAt)};
  }
  return activity;
}

}  // namespace ddp::comm
