// ActivityLog: what one communicator's collectives are doing, for the watchdog.
//
// Every Communicator keeps one. The issuing thread records each collective as
// it is issued (Communicator::newWork); the watchdog's threads read snapshots.
// A collective counts as pending until its Work completes successfully (a
// failed one stays pending for good), so the oldest
// pending collective is the one this rank is blocked on, and the gap between
// its sequence number and a peer's says who has not arrived
// (Note [Watchdog reports] in comm/watchdog.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "comm/work.h"
#include "runtime/thread_state.h"

namespace ddp::comm {

// One collective, as the watchdog reports it.
struct PendingCollective {
  std::uint64_t sequence = 0;
  std::string what;     // "allreduce(float32 x 1024, sum)": equal on every rank
  std::string context;  // "step 12, bucket 1 of 3" when it was issued
  double waitingSeconds = 0.0;
};

// A snapshot of one communicator.
struct ChannelActivity {
  std::string channel;       // the backend: "mpi", "nccl"
  std::uint64_t issued = 0;  // collectives issued so far (the next one's number)
  std::string context;       // the issuing thread's context now
  double idleSeconds = 0.0;  // since the last collective completed (no pending one)
  // Since the issuing thread last set its context (a step began, an
  // evaluation batch): progress between collectives, for the watchdog.
  double contextSeconds = 0.0;
  std::optional<PendingCollective> oldestPending;
};

class ActivityLog {
 public:
  explicit ActivityLog(std::string channel) : channel_(std::move(channel)) {}

  // Issuing thread. Both note which thread that is (issuer).
  void setContext(const std::string& context);
  void issued(std::uint64_t sequence, std::string what, std::string context, const WorkPtr& work);
  // Any thread.
  ChannelActivity snapshot() const;
  // The thread that last issued a collective or set the context (the
  // training thread), or 0 before any did. Any thread.
  ThreadId issuer() const { return issuer_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::uint64_t sequence;
    std::string what;
    std::string context;
    std::chrono::steady_clock::time_point issuedAt;
    WorkPtr work;  // held until pruned: small, and a failed one must stay
  };
  // Drops completed collectives from the front. Caller holds mutex_.
  void prune() const;

  const std::string channel_;
  mutable std::mutex mutex_;
  mutable std::deque<Entry> pending_;
  mutable std::chrono::steady_clock::time_point lastCompleted_ = std::chrono::steady_clock::now();
  std::uint64_t issued_ = 0;
  std::string context_;
  std::chrono::steady_clock::time_point contextSetAt_ = std::chrono::steady_clock::now();
  std::atomic<ThreadId> issuer_{0};
};

}  // namespace ddp::comm
