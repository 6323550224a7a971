#include "runtime/cpu_history.h"

#include <algorithm>

#include "runtime/process_stops.h"

namespace ddp {

void CpuHistory::add(Clock::time_point at, double cpuSeconds) {
  std::lock_guard lock(mutex_);
  samples_.push_back({at, cpuSeconds});
  while (samples_.front().at < at - keep_)
    samples_.pop_front();
}

std::optional<CpuUse> CpuHistory::over(double runningSeconds, Clock::time_point now,
                                       double cpuSecondsNow, double atLeast) const {
  std::optional<Sample> from;
  {
    std::lock_guard lock(mutex_);
    // Running time to `now` only shrinks from older samples to newer ones,
    // so the samples beyond the span come first: a binary search.
    const auto it = std::partition_point(samples_.begin(), samples_.end(), [&](const Sample& s) {
      return std::chrono::duration<double>(stops::runningBetween(s.at, now)).count() >
             runningSeconds;
    });
    if (it != samples_.end()) from = *it;
  }
  if (!from) return std::nullopt;
  const double span = std::chrono::duration<double>(stops::runningBetween(from->at, now)).count();
  if (span < atLeast) return std::nullopt;
  return CpuUse{(cpuSecondsNow - from->cpuSeconds) / span, span};
}

}  // namespace ddp
