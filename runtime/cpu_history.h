// The process's CPU time over the last minutes, for "the process used 0.00
// CPUs over the last 61.0 s" in the watchdog's reports (Note [Where a stuck
// rank is] in comm/watchdog.h).
//
// The span is time the process ran (Note [Time the process was stopped] in
// runtime/process_stops.h), as the quiet time it stands beside: a process
// stopped for part of the span used no CPU then, and dividing by the wall
// time would report a busy rank as idle.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>

namespace ddp {

// The CPUs a process used over a span: cpuSeconds / seconds.
struct CpuUse {
  double cpus = 0.0;
  double seconds = 0.0;  // the span, running time
};

// Samples of the process's CPU time, taken by one thread (add) and read by
// others (over). Thread-safe.
class CpuHistory {
 public:
  using Clock = std::chrono::steady_clock;

  // Samples older than `keep` (wall time) are dropped as new ones come.
  explicit CpuHistory(Clock::duration keep) : keep_(keep) {}

  // Records that the process had used `cpuSeconds` of CPU time by `at`
  // (processCpuSeconds). Times must not go back.
  void add(Clock::time_point at, double cpuSeconds);

  // The CPUs used from the oldest sample within the last `runningSeconds`
  // of running time to `now`, when the process had used `cpuSecondsNow`.
  // nullopt when no sample lies within, or the span is under `atLeast`
  // seconds: too short to say. A span longer than the history is the
  // history's.
  std::optional<CpuUse> over(double runningSeconds, Clock::time_point now, double cpuSecondsNow,
                             double atLeast = 0.5) const;

 private:
  struct Sample {
    Clock::time_point at;
    double cpuSeconds = 0.0;
  };
  Clock::duration keep_;
  mutable std::mutex mutex_;
  std::deque<Sample> samples_;
};

}  // namespace ddp
