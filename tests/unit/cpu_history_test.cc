// CpuHistory: the CPUs used over a span of running time.
#include "runtime/cpu_history.h"

#include <gtest/gtest.h>

#include "runtime/process_stops.h"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Clock = CpuHistory::Clock;

// One sample a second from `base` to `base + seconds`, the process using
// `cpus` CPUs while it runs: nothing over [stopFrom, stopTo).
void fill(CpuHistory& history, Clock::time_point base, int seconds, double cpus,
          Clock::duration stopFrom = 0s, Clock::duration stopTo = 0s) {
  double used = 0.0;
  for (int s = 0; s <= seconds; ++s) {
    const Clock::duration at = std::chrono::seconds(s);
    if (s > 0 && !(at > stopFrom && at <= stopTo)) used += cpus;
    history.add(base + at, used);
  }
}

TEST(CpuHistory, TheCpusUsedOverTheLastSeconds) {
  CpuHistory history(10min);
  const Clock::time_point base = Clock::now() - 1h;
  fill(history, base, 20, 0.5);
  const auto use = history.over(4.0, base + 20s, 10.0);
  ASSERT_TRUE(use);
  EXPECT_DOUBLE_EQ(use->seconds, 4.0);
  EXPECT_DOUBLE_EQ(use->cpus, 0.5);
}

// A stop of 5 s inside the span: the process ran 0.5 CPUs whenever it ran,
// and the span reaches 5 s further back to cover 6 s of running time. Over
// the wall time it would read 0.25 CPUs over a span starting too late.
TEST(CpuHistory, AStopIsLeftOutOfTheSpan) {
  CpuHistory history(10min);
  const Clock::time_point base = Clock::now() - 2h;
  fill(history, base, 20, 0.5, 12s, 17s);
  stops::noteWake(base + 12s, base + 17s);
  ASSERT_EQ(stops::stoppedBetween(base, base + 20s), 5s);
  const auto use = history.over(6.0, base + 20s, 7.5);
  ASSERT_TRUE(use);
  EXPECT_DOUBLE_EQ(use->seconds, 6.0);  // from base + 9 s
  EXPECT_DOUBLE_EQ(use->cpus, 0.5);
}

TEST(CpuHistory, ASpanTooShortOrWithoutSamplesSaysNothing) {
  CpuHistory history(10min);
  const Clock::time_point base = Clock::now() - 3h;
  EXPECT_FALSE(history.over(5.0, base, 0.0));  // no sample yet
  fill(history, base, 3, 1.0);
  EXPECT_FALSE(history.over(0.4, base + 3s, 3.0));   // only the sample at `now`: 0 s
  EXPECT_FALSE(history.over(5.0, base + 10s, 3.0));  // every sample is older than 5 s
  const auto use = history.over(0.7, base + 3s + 600ms, 3.0, 0.5);
  ASSERT_TRUE(use);
  EXPECT_NEAR(use->seconds, 0.6, 1e-9);
}

// Samples older than the history keeps are gone: a longer span is the
// history's.
TEST(CpuHistory, ASpanLongerThanTheHistoryIsTheHistorys) {
  CpuHistory history(5s);
  const Clock::time_point base = Clock::now() - 4h;
  fill(history, base, 20, 1.0);
  const auto use = history.over(60.0, base + 20s, 20.0);
  ASSERT_TRUE(use);
  EXPECT_DOUBLE_EQ(use->seconds, 5.0);
  EXPECT_DOUBLE_EQ(use->cpus, 1.0);
}

}  // namespace
}  // namespace ddp
