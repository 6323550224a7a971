// --time-limit: its durations, and when rank 0 stops (Note [Stopping before
// a time limit] in launcher/time_limit.h), on a clock the test sets; and the
// write it times at start-up (Note [The first write's time] in
// launcher/write_probe.h).
#include "launcher/time_limit.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "launcher/write_probe.h"
#include "runtime/process_stops.h"
#include "test_files.h"

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

// Note [Time the process was stopped]: Slurm moves a suspended job's end by
// the suspension, so the 80 s budget leaves out the 30 s the process was
// stopped, as it does the writes'. Times in the past, so that the stop
// recorded overlaps no other test's.
TEST(TimeLimit, TimeTheProcessWasStoppedIsNotCounted) {
  const Clock::time_point start = Clock::now() - std::chrono::seconds(1000);
  TimeLimit limit(80, start, true, false);
  stops::noteWake(at(start, 10), at(start, 40));  // stopped from 10 s to 40 s
  limit.writeStarted(at(start, 5));
  limit.writeDone(at(start, 45));                  // 40 s, 30 of them stopped
  EXPECT_FALSE(limit.timeUp(5, at(start, 94.9)));  // ran 64.9 s; + 5 + 10 < 80
  EXPECT_TRUE(limit.timeUp(5, at(start, 95)));
  EXPECT_FALSE(limit.endedPastLimit(at(start, 100)));  // ran 70 s
  EXPECT_EQ(limit.endText(at(start, 100)), "--time-limit 0:01:20: the run ended 10.00 s before it");
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
  // Said once the stop's checkpoint is written, and timed: what the check
  // counted, not what is known by then.
  checkpoints.writeStarted(at(start, 58.5));
  checkpoints.writeDone(at(start, 59));
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

// Note [The first write's time]: until a checkpoint is timed, the writes
// timed at start-up are kept for; once one is, it counts for both files.
TEST(TimeLimit, BeforeACheckpointIsTimedTheWriteTimedAtStartUpStandsIn) {
  const Clock::time_point start = Clock::now();
  TimeLimit limit(100, start, true, /*savesModel=*/true);
  limit.expectWrites(/*checkpointSeconds=*/4, /*modelSeconds=*/1);
  EXPECT_FALSE(limit.timeUp(10, at(start, 84.9)));  // 84.9 + 10 + 4 + 1 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 85)));
  EXPECT_EQ(limit.stopText(),
            "at 0:01:25 of 0:01:40, the steps to the next stop check could take up to 10.00 s "
            "and the last writes 5.00 s (at the rate of a write timed at start-up: no checkpoint "
            "had been written yet)");
  limit.writeStarted(at(start, 86));  // the first checkpoint, still being written: counts twice
  EXPECT_FALSE(limit.timeUp(10, at(start, 80.9)));  // 80.9 + 10 + 2 x 4 + 1 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 81)));
  limit.writeDone(at(start, 88));                   // it took 2 s: the estimate is dropped
  EXPECT_FALSE(limit.timeUp(10, at(start, 85.9)));  // 85.9 + 10 + 2 x 2 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 86)));
  EXPECT_EQ(limit.stopText(),
            "at 0:01:26 of 0:01:40, the steps to the next stop check could take up to 10.00 s "
            "and the last writes 4.00 s");
}

// --save-model alone: no checkpoint is ever timed, so the estimate stays.
TEST(TimeLimit, SavingTheModelAloneKeepsItsEstimatedWrite) {
  const Clock::time_point start = Clock::now();
  TimeLimit limit(100, start, /*writesCheckpoints=*/false, /*savesModel=*/true);
  limit.expectWrites(6, 3);
  EXPECT_FALSE(limit.timeUp(10, at(start, 86.9)));  // 86.9 + 10 + 3 < 100
  EXPECT_TRUE(limit.timeUp(10, at(start, 87)));
}

TEST(WriteProbe, WritesUpToItsCapAndLeavesNothingBehind) {
  ddp::testing::TempDir dir;
  std::string whyNot;
  const auto small = timeWrite(dir.path(), 9 << 20, &whyNot);
  ASSERT_TRUE(small) << whyNot;
  EXPECT_EQ(small->bytes, 8u << 20);  // whole chunks of 4 MiB
  EXPECT_GT(small->seconds, 0.0);
  EXPECT_EQ(timeWrite(dir.path(), 1000)->bytes, 4u << 20);  // at least one
  const auto capped = timeWrite(dir.path(), kWriteProbeBytes * 4);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->bytes, kWriteProbeBytes);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_FALSE(timeWrite(dir.path(), 0));
}

TEST(WriteProbe, TakesFilesToWriteAtItsRateWithAMarginNoFasterThanItself) {
  const WriteTime probe{1000, 0.5};
  EXPECT_DOUBLE_EQ(probe.secondsFor(4000), kWriteProbeMargin * 2.0);
  EXPECT_DOUBLE_EQ(probe.secondsFor(10), kWriteProbeMargin * 0.5);
  EXPECT_DOUBLE_EQ(WriteTime{}.secondsFor(10), 0.0);
}

TEST(WriteProbe, TimesFreshMemoryUpToItsCap) {
  const std::optional<WriteTime> fresh = timeFreshMemory(3 << 20);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->bytes, 3u << 20);
  EXPECT_GT(fresh->seconds, 0.0);
  EXPECT_EQ(timeFreshMemory(kWriteProbeBytes * 2)->bytes, kWriteProbeBytes);
  EXPECT_EQ(timeFreshMemory(0)->bytes, 0u);
}

TEST(WriteProbe, AFailureIsNamedAndLeavesNothingBehind) {
  ddp::testing::TempDir dir;
  std::string whyNot;
  EXPECT_FALSE(timeWrite(dir.file("missing"), 1 << 20, &whyNot));
  EXPECT_NE(whyNot.find("missing/.ddp_train-write-probe-"), std::string::npos) << whyNot;
  EXPECT_NE(whyNot.find(": cannot create (No such file or directory)"), std::string::npos)
      << whyNot;
  if (::geteuid() != 0) {  // root writes anywhere
    ::chmod(dir.path().c_str(), 0500);
    EXPECT_FALSE(timeWrite(dir.path(), 1 << 20));
    ::chmod(dir.path().c_str(), 0700);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace ddp::launcher
