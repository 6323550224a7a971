#include "runtime/heartbeat.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

#include "runtime/process_stops.h"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();

std::atomic<std::int64_t> lastBeat{kNever};  // steady_clock ticks

}  // namespace

void heartbeat() {
  lastBeat.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

double secondsSinceHeartbeat() {
  const std::int64_t last = lastBeat.load(std::memory_order_relaxed);
  if (last == kNever) return std::numeric_limits<double>::infinity();
  // Note [Time the process was stopped]: only time this process ran.
  return stops::runningSecondsSince(Clock::time_point(Clock::duration(last)));
}

}  // namespace ddp
