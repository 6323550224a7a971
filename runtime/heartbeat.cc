#include "runtime/heartbeat.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

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
  const Clock::duration since = Clock::now().time_since_epoch() - Clock::duration(last);
  return std::chrono::duration<double>(since).count();
}

}  // namespace ddp
