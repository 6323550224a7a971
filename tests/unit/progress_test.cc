// Note [Finding a straggler]: the slowest rank against the others' median,
// by a ratio and by at least a millisecond.
#include "launcher/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/log.h"

namespace ddp::launcher {
namespace {

TEST(Straggler, TheSlowestRankIsNamedWithItsHost) {
  // The others' median is 10 ms (9.8, 10, 10.5): rank 3 took 2.5x that.
  const auto slow = stragglerOf({10.0, 10.5, 9.8, 25.0});
  ASSERT_TRUE(slow);
  EXPECT_EQ(stragglerWarning("epoch 4", *slow, {"a", "a", "b", "b"}),
            "epoch 4: rank 3 (b) took 2.50x the other ranks' median compute per step (25.00 ms "
            "against 10.00 ms: data, forward, backward and optimizer); every all-reduce waits for "
            "it, so the job runs at its pace");
  // Two ranks: against the other one, not a mean the straggler is half of.
  const auto pair = stragglerOf({2.0, 11.0});
  ASSERT_TRUE(pair);
  const std::string warning = stragglerWarning("epoch 1", *pair, {"vm", "vm"});
  EXPECT_NE(warning.find("rank 1 (vm) took 5.50x"), std::string::npos) << warning;
}

TEST(Straggler, RanksWithinTheRatioOrAloneAreNotStragglers) {
  EXPECT_FALSE(stragglerOf({10.0, 12.4}));  // 1.24x
  EXPECT_TRUE(stragglerOf({10.0, 12.6}));   // 1.26x
  EXPECT_FALSE(stragglerOf({0.28, 0.62}));  // 2.2x, but 0.34 ms: noise
  EXPECT_FALSE(stragglerOf({10.0}));
  EXPECT_FALSE(stragglerOf({0.0, 0.0}));  // an epoch without timed steps
  EXPECT_FALSE(stragglerOf({}));
}

// A rank stopped in the stretch (Note [Time the process was stopped] in
// runtime/process_stops.h) sends NaN: whichever phase the stop fell in says
// nothing of its pace, so no rank is named.
TEST(Straggler, AStretchARankWasStoppedInNamesNoRank) {
  const double stopped = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(stragglerOf({10.0, 10.5, 25.0}));
  EXPECT_FALSE(stragglerOf({10.0, stopped, 25.0}));
  EXPECT_FALSE(stragglerOf({stopped, 10.0}));
}

using CpuTime = trainer::PaceReport::CpuTime;

// Note [Finding a contended CPU]: a rank whose training thread ran less than
// kContentionRatio of what its own job leaves it.
TEST(Contention, ARankSharingItsCoreWithAnotherJobIsNamed) {
  // Two jobs bound to core 0: on a CPU 2.87 s of 5.95 s ready, expecting all of it.
  EXPECT_EQ(contentionWarning("epoch 2", {{2.87, 3.08, 1.0}, {3.0, 0.2, 1.0}}, {"a", "b"}),
            "epoch 2: other processes compete for the CPUs of rank 0 (a: on a CPU 48% of the "
            "time it was ready to run, where its own job's threads leave it 100%). Another job "
            "bound to the same cores? mpirun binds each job's ranks from core 0 up, unaware of "
            "other jobs: give each job its own cores (mpirun --cpu-set, taskset -c) or launch "
            "with --bind-to none");
  const auto two = contentionWarning("epoch 1", {{1.0, 1.0, 1.0}, {3.0, 0.1, 1.0}, {0.6, 1.4, 0.5}},
                                     {"a", "a", "b"});
  ASSERT_TRUE(two);
  EXPECT_NE(two->find("CPUs of ranks 0 (a: on a CPU 50% of the time it was ready to run, where "
                      "its own job's threads leave it 100%), 2 (b: on a CPU 30% of the time it "
                      "was ready to run, where its own job's threads leave it 50%)."),
            std::string::npos)
      << *two;
}

TEST(Contention, TheJobsOwnOversubscriptionAndShortEpochsAreNot) {
  // Four ranks on two cores: 0.55 of the 0.5 they expect.
  EXPECT_FALSE(
      contentionWarning("epoch 1", std::vector<CpuTime>(4, {1.6, 1.3, 0.5}), {"a", "a", "a", "a"}));
  EXPECT_FALSE(contentionWarning("epoch 1", {{3.0, 1.0, 1.0}}, {"a"}));  // 75%: at the ratio
  EXPECT_TRUE(contentionWarning("epoch 1", {{2.9, 1.1, 1.0}}, {"a"}));   // 72.5%
  EXPECT_FALSE(contentionWarning("epoch 1", {{0.4, 0.5, 1.0}}, {"a"}));  // 0.9 s ready: noise
  EXPECT_FALSE(contentionWarning("epoch 1", {{0.0, 0.0, 1.0}}, {"a"}));  // no run-queue figures
  EXPECT_FALSE(cpuShareOf({0.0, 0.0, 1.0}));
  EXPECT_DOUBLE_EQ(*cpuShareOf({3.0, 1.0, 1.0}), 0.75);
}

// kThrottledRatio: a rank whose CPU quota ran out is short of quota, not of
// cores (another process under the same quota took it).
TEST(Contention, ARankWhoseQuotaRanOutIsToldSo) {
  EXPECT_EQ(contentionWarning("epoch 1", {{2.6, 2.4, 1.0, 0.61}}, {"vm"}),
            "epoch 1: other processes under the same CPU quota take the CPU time of rank 0 (vm: "
            "on a CPU 52% of the time it was ready to run, where its own job's threads leave it "
            "100%; its cgroup's CPU quota ran out in 61% of the periods). The kernel stops every "
            "thread under a quota once it runs out, until the next period, and this job's own "
            "threads fit it: move the other processes out of its cgroup, or raise the quota "
            "(docker run --cpus, a pod's limits.cpu)");
  // Under a quota that rarely ran out, or beside a rank without one: the cores.
  for (const double throttled : {0.1, -1.0}) {
    const auto warning = contentionWarning("epoch 1", {{2.6, 2.4, 1.0, throttled}}, {"vm"});
    ASSERT_TRUE(warning);
    EXPECT_NE(warning->find("other processes compete for the CPUs of rank 0"), std::string::npos);
    EXPECT_EQ(warning->find("ran out"), std::string::npos) << *warning;
  }
  const auto mixed =
      contentionWarning("epoch 1", {{2.6, 2.4, 1.0, 0.5}, {2.6, 2.4, 1.0, -1.0}}, {"a", "b"});
  ASSERT_TRUE(mixed);
  EXPECT_NE(mixed->find("compete for the CPUs of ranks 0 (a: on a CPU 52% of the time it was "
                        "ready to run, where its own job's threads leave it 100%; its cgroup's "
                        "CPU quota ran out in 50% of the periods), 1 (b:"),
            std::string::npos)
      << *mixed;
  // Throttled without being short of CPU (the job's own share of a quota): nothing.
  EXPECT_FALSE(contentionWarning("epoch 1", {{2.0, 2.0, 0.5, 0.9}}, {"vm"}));
}

TEST(NonFiniteTest, OnlyANonFiniteLossOverSomeSamplesIsWarnedOf) {
  const auto warning = nonFiniteTestWarning("after epoch 3", {std::nan(""), 0.1, 1000});
  ASSERT_TRUE(warning);
  EXPECT_EQ(*warning,
            "the test loss after epoch 3 is nan: the model's outputs on the test set are not "
            "finite, as after updates that diverged (a lower --lr, --warmup-steps or "
            "--clip-grad-norm may help)");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NE(nonFiniteTestWarning("after step 5", {inf, 0.1, 10})->find("after step 5 is inf:"),
            std::string::npos);
  EXPECT_FALSE(nonFiniteTestWarning("after epoch 1", {5.4e24, 0.1, 1000}));     // large but finite
  EXPECT_FALSE(nonFiniteTestWarning("after epoch 1", {std::nan(""), 0.0, 0}));  // no test set
}

TEST(Pace, AReportSaysWhatItCovers) {
  trainer::PaceReport pace;
  pace.epoch = 1;
  pace.firstStep = 1201;
  pace.lastStep = 1850;
  EXPECT_EQ(paceSpan(pace, true), "epoch 1");
  EXPECT_EQ(paceSpan(pace, false), "steps 1201-1850 of epoch 1");
  const auto straggler = stragglerOf({10.0, 10.5, 9.8, 25.0});
  ASSERT_TRUE(straggler);
  EXPECT_EQ(straggler->rank, 3u);
  EXPECT_DOUBLE_EQ(straggler->computeMs, 25.0);
  EXPECT_DOUBLE_EQ(straggler->othersMedianMs, 10.0);
  EXPECT_FALSE(stragglerOf({10.0, 12.4}));
  // Over a report, only from kStragglerMinSteps timed steps on.
  pace.rankComputeMs = {2.0, 11.0};
  pace.timedSteps = kStragglerMinSteps - 1;
  EXPECT_FALSE(stragglerIn(pace));
  pace.timedSteps = kStragglerMinSteps;
  ASSERT_TRUE(stragglerIn(pace));
  EXPECT_EQ(stragglerIn(pace)->rank, 1u);
  EXPECT_EQ(contendedRanks({{1.0, 1.0, 1.0}, {3.0, 0.1, 1.0}, {0.6, 1.4, 0.5}}),
            (std::vector<std::size_t>{0, 2}));
}

// The progress line's loss is the mean over the steps since the previous
// line, and an epoch's first line covers only that epoch's steps.
TEST(ProgressLine, ShowsTheMeanLossSinceThePreviousLine) {
  log::setRank(0);
  ProgressPrinter printer(0, 2, 2, "", 0, {"vm"});
  auto step = [&](std::size_t epoch, std::size_t inEpoch, double loss) {
    trainer::StepReport r;
    r.epoch = epoch;
    r.stepInEpoch = inEpoch;
    r.stepsInEpoch = 3;
    r.stepsLeft = 3 - inEpoch;
    r.loss = loss;
    printer.onStep(r);
  };
  testing::internal::CaptureStdout();
  step(1, 1, 1.0);
  step(1, 2, 3.0);  // a line: (1 + 3) / 2
  step(1, 3, 100.0);
  trainer::EpochReport epoch;
  epoch.epoch = 1;
  printer.onEpoch(epoch);
  step(2, 1, 4.0);
  step(2, 2, 6.5);  // a line: (4 + 6.5) / 2, without epoch 1's last step
  const std::string out = testing::internal::GetCapturedStdout();
  log::setRank(-1);
  EXPECT_NE(out.find("[r0] epoch 1/2  step 2/3  loss 2.0000  lr "), std::string::npos) << out;
  EXPECT_NE(out.find("[r0] epoch 2/2  step 2/3  loss 5.2500  lr "), std::string::npos) << out;
  EXPECT_EQ(out.find("step 3/3"), std::string::npos) << out;
}

}  // namespace
}  // namespace ddp::launcher
