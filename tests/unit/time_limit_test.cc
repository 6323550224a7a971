// --time-limit: its durations, and when rank 0 stops (Note [Stopping before
// a time limit] in launcher/time_limit.h), on a clock the test sets.
#include "launcher/time_limit.h"

#include <gtest/gtest.h>

namespace ddp::launcher {
namespace {

using Clock = TimeLimit::Clock;

Clock::time_point at(Clock::time_point start, double seconds) {
  return start +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

TEST(Duration, UnitsAndSbatchForms) {
  EXPECT_EQ(parseDuration("5400s"), 5400.0);
  EXPECT_EQ(parseDuration("90m"), 5400.0);
  EXPECT_EQ(parseDuration("1.5h"), 5400.0);
  EXPECT_EQ(parseDuration("2d"), 172800.0);
  EXPECT_EQ(parseDuration("0.5s"), 0.5);
  // sbatch --time: M:SS, H:MM:SS, D-H, D-H:MM, D-H:MM:SS.
  EXPECT_EQ(parseDuration("90:30"), 5430.0);
  EXPECT_EQ(parseDuration("1:30:00"), 5400.0);
  EXPECT_EQ(parseDuration("2-3"), 2 * 86400.0 + 3 * 3600);
  EXPECT_EQ(parseDuration("2-3:15"), 2 * 86400.0 + 3 * 3600 + 15 * 60);
  EXPECT_EQ(parseDuration("1-00:00:01"), 86401.0);
}

TEST(Duration, RefusesWhatIsNotOne) {
  for (const char* text :
       {"",   "90", "1.5",    "s",       "m",     "-5m",  "0s",   "0:00:00", "1:2:3:4", "1::00",
        "1-", "-1", "x-1:00", "1:-1:00", "1h30m", "nanm", "infh", "1e400s",  " 90m",    "90 m"}) {
    EXPECT_FALSE(parseDuration(text).has_value()) << '"' << text << '"';
  }
}

TEST(Duration, Text) {
  EXPECT_EQ(durationText(42.257), "42.26 s");
  EXPECT_EQ(durationText(0), "0.00 s");
  EXPECT_EQ(durationText(60), "0:01:00");
  EXPECT_EQ(durationText(5400), "1:30:00");
  EXPECT_EQ(durationText(5399.9), "1:29:59");  // whole seconds, not rounded up past the limit
  EXPECT_EQ(durationText(90061.5), "1-01:01:01");
}

TEST(TimeLimit, StopsWhenTheNextStretchAndTheWritesWouldNotFit) {
  const Clock::time_point start = Clock::now();
  TimeLimit limit(100, start, /*writesCheckpoints=*/true, /*savesModel=*/false);
  limit.writeStarted(at(start, 10));
  limit.writeDone(at(start, 15));  // a checkpoint took 5 s
  limit.writeStarted(at(start, 40));
  limit.writeDone(at(start, 42));                   // a shorter one does not lower it
  EXPECT_FALSE(limit.timeUp(10, at(start, 84.9)));  // 84.9 + 10 + 5 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 85)));
  EXPECT_EQ(limit.stopText(),
            "at 0:01:25 of 0:01:40, the steps to the next stop check could take up to 10.00 s "
            "and the last writes 5.00 s");
  EXPECT_EQ(limit.endText(at(start, 97.5)), "--time-limit 0:01:40: the run ended 2.50 s before it");
  EXPECT_FALSE(limit.endedPastLimit(at(start, 100)));
  EXPECT_TRUE(limit.endedPastLimit(at(start, 101)));
  EXPECT_EQ(limit.endText(at(start, 101)),
            "--time-limit 0:01:40: the run ended 1.00 s after it: its last steps or writes took "
            "longer than the longest before them");
}

TEST(TimeLimit, SavingTheModelKeepsTimeForASecondWrite) {
  const Clock::time_point start = Clock::now();
  TimeLimit limit(100, start, true, /*savesModel=*/true);
  limit.writeStarted(at(start, 10));
  limit.writeDone(at(start, 15));
  EXPECT_FALSE(limit.timeUp(10, at(start, 79.9)));  // 79.9 + 10 + 2 x 5 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 80)));
}

TEST(TimeLimit, ACheckpointStillBeingWrittenCountsOnceMore) {
  const Clock::time_point start = Clock::now();
  TimeLimit limit(100, start, true, false);
  limit.writeStarted(at(start, 10));
  limit.writeDone(at(start, 15));
  limit.writeStarted(at(start, 70));                // in the background at the check
  EXPECT_FALSE(limit.timeUp(10, at(start, 79.9)));  // 79.9 + 10 + 2 x 5 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 80)));
}

TEST(TimeLimit, WithoutATimedWriteKeepsTimeForTheStepsAndSaysSo) {
  const Clock::time_point start = Clock::now();
  TimeLimit checkpoints(60, start, true, false);
  EXPECT_FALSE(checkpoints.timeUp(2, at(start, 57.9)));
  EXPECT_TRUE(checkpoints.timeUp(2, at(start, 58)));
  EXPECT_EQ(checkpoints.stopText(),
            "at 58.00 s of 0:01:00, the steps to the next stop check could take up to 2.00 s (and "
            "nothing was kept for the last writes: no checkpoint had been written to time)");
  // A write still in progress counts only once it is done.
  TimeLimit none(60, start, false, false);
  none.writeDone(at(start, 5));  // no start: ignored
  EXPECT_TRUE(none.timeUp(2, at(start, 58)));
  EXPECT_EQ(none.stopText(),
            "at 58.00 s of 0:01:00, the steps to the next stop check could take up to 2.00 s");
}

}  // namespace
}  // namespace ddp::launcher
