#include "runtime/process_stops.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

namespace ddp::stops {
namespace {

struct Stop {
  Clock::time_point from, to;
};

// The latest stops, oldest overwritten first: a wait spanning more than
// this many stops counts the older ones as running time, as before.
constexpr std::size_t kKept = 64;

struct Record {
  std::mutex mutex;
  std::array<Stop, kKept> stops{};
  std::atomic<int> count{0};  // recorded in all; read without the lock
  Clock::duration total{};
};

Record& record() {
  static Record* r = new Record;  // leaked: waiters may look during exit
  return *r;
}

}  // namespace

void noteWake(Clock::time_point due, Clock::time_point woke) {
  if (woke - due < kLateBy) return;
  Record& r = record();
  std::lock_guard lock(r.mutex);
  const int n = r.count.load(std::memory_order_relaxed);
  if (n > 0) {
    // Another thread's look at the same stop: only what it did not cover.
    Stop& last = r.stops[static_cast<std::size_t>(n - 1) % kKept];
    if (due <= last.to) {
      if (woke <= last.to) return;
      r.total += woke - last.to;
      last.to = woke;
      return;
    }
  }
  r.stops[static_cast<std::size_t>(n) % kKept] = Stop{due, woke};
  r.total += woke - due;
  r.count.store(n + 1, std::memory_order_release);
}

Clock::duration stoppedBetween(Clock::time_point from, Clock::time_point to) {
  Record& r = record();
  if (r.count.load(std::memory_order_acquire) == 0) return Clock::duration::zero();
  std::lock_guard lock(r.mutex);
  const int n = r.count.load(std::memory_order_relaxed);
  Clock::duration covered{};
  for (int i = std::max(0, n - static_cast<int>(kKept)); i < n; ++i) {
    const Stop& s = r.stops[static_cast<std::size_t>(i) % kKept];
    const Clock::time_point a = std::max(s.from, from), b = std::min(s.to, to);
    if (b > a) covered += b - a;
  }
  return covered;
}

Clock::duration runningBetween(Clock::time_point from, Clock::time_point to) {
  return std::max(Clock::duration::zero(), (to - from) - stoppedBetween(from, to));
}

Clock::duration runningSince(Clock::time_point start) {
  return runningBetween(start, Clock::now());
}

double runningSecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(runningSince(start)).count();
}

int stopCount() {
  return record().count.load(std::memory_order_acquire);
}

Clock::duration totalStopped() {
  Record& r = record();
  if (r.count.load(std::memory_order_acquire) == 0) return Clock::duration::zero();
  std::lock_guard lock(r.mutex);
  return r.total;
}

Deadline::Deadline(Clock::duration limit) : start_(Clock::now()), limit_(limit) {}

Clock::time_point Deadline::nextLook() {
  const Clock::time_point now = Clock::now();
  due_ = now + std::min(kLookEvery, leftAt(now));
  return due_;
}

bool Deadline::passed() {
  const Clock::time_point now = Clock::now();
  if (due_ != Clock::time_point{}) noteWake(due_, now);
  return leftAt(now) == Clock::duration::zero();
}

Clock::duration Deadline::left() const {
  return leftAt(Clock::now());
}

Clock::duration Deadline::leftAt(Clock::time_point now) const {
  return std::max(Clock::duration::zero(), limit_ - runningBetween(start_, now));
}

}  // namespace ddp::stops
