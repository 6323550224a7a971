// Note [The run's last --metrics line]: the end line's keys, present only
// where they say something.
#include "launcher/run_end.h"

#include <gtest/gtest.h>

#include <csignal>
#include <limits>
#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

nlohmann::json lineOf(const RunOutcome& outcome) {
  return nlohmann::json::parse(runEndMetrics(outcome));
}

TEST(RunEnd, AFinishedRunSaysHowFarItGotAndNothingItDidNotUse) {
  RunOutcome done;
  done.endedBy = endedByName(trainer::RunEnd::kEpochs);
  done.globalStep = 1876;
  done.plannedSteps = 1876;
  done.wallSeconds = 12.5;
  EXPECT_EQ(lineOf(done), nlohmann::json::parse(R"({"ended_by": "epochs", "exit_code": 0,
      "last_step": 1876, "planned_steps": 1876, "run_time_s": 12.5})"));
  // None of the keys that tell the other lines apart (README "Reading the output").
  for (const char* key :
       {"train_loss", "test_loss", "loss", "epoch", "global_step", "wall_time_s", "evaluated"})
    EXPECT_FALSE(lineOf(done).contains(key)) << key;
  EXPECT_FALSE(lineOf(done).contains("suspended_s"));  // it was not
}

// run_time_s is wall time; a run suspended for part of it says how long.
TEST(RunEnd, ASuspendedRunSaysForHowLong) {
  RunOutcome done;
  done.endedBy = "epochs";
  done.wallSeconds = 20.5;
  done.suspendedSeconds = 8.25;
  EXPECT_EQ(lineOf(done)["suspended_s"], 8.25);
  EXPECT_EQ(lineOf(done)["run_time_s"], 20.5);
}

TEST(RunEnd, NamesEveryWayARunEnds) {
  EXPECT_STREQ(endedByName(trainer::RunEnd::kEpochs), "epochs");
  EXPECT_STREQ(endedByName(trainer::RunEnd::kMaxSteps), "max_steps");
  EXPECT_STREQ(endedByName(trainer::RunEnd::kEarlyStop), "early_stop");
  EXPECT_STREQ(endedByName(trainer::RunEnd::kSignal), "signal");
  EXPECT_STREQ(endedByName(trainer::RunEnd::kTimeLimit), "time_limit");
}

TEST(RunEnd, ASignalIsNamedAndTheCheckpointToResumeFromGiven) {
  RunOutcome stopped;
  stopped.endedBy = "signal";
  stopped.signal = SIGTERM;
  stopped.exitCode = 128 + SIGTERM;
  stopped.globalStep = 370;
  stopped.checkpoint = "ck/checkpoint-000000370.safetensors";
  const nlohmann::json line = lineOf(stopped);
  EXPECT_EQ(line["signal"], "SIGTERM");
  EXPECT_EQ(line["exit_code"], 143);
  EXPECT_EQ(line["checkpoint"], "ck/checkpoint-000000370.safetensors");
  EXPECT_FALSE(line.contains("planned_steps"));  // not known: not guessed
  EXPECT_EQ(signalName(SIGINT), "SIGINT");
  EXPECT_EQ(signalName(0), "signal 0");  // no such signal
  // --checkpoint-dir with nothing written yet: null, not absent.
  stopped.checkpoint = "";
  EXPECT_TRUE(lineOf(stopped)["checkpoint"].is_null());
  // Another end says no signal.
  stopped.endedBy = "time_limit";
  EXPECT_FALSE(lineOf(stopped).contains("signal"));
}

TEST(RunEnd, AFailureCarriesItsMessage) {
  RunOutcome failed;
  failed.endedBy = "error";
  failed.exitCode = 1;
  failed.globalStep = 2;
  failed.error = "step 3: the gradient of layers.0.weight holds a NaN";
  const nlohmann::json line = lineOf(failed);
  EXPECT_EQ(line["error"], failed.error);
  EXPECT_EQ(line["exit_code"], 1);
  failed.endedBy = "epochs";
  EXPECT_FALSE(lineOf(failed).contains("error"));
  // A path need not be UTF-8; the line must still be written, and be JSON.
  failed.endedBy = "error";
  failed.error = "cannot open '/data/caf\xe9.idx'";
  EXPECT_EQ(lineOf(failed)["error"], "cannot open '/data/caf\xef\xbf\xbd.idx'");
}

TEST(RunEnd, TheBestEvaluationAndItsFileOnlyOnceThereIsOne) {
  RunOutcome run;
  run.endedBy = "early_stop";
  run.best = trainer::BestRecord{};
  run.best->metric = trainer::BestMetric::kTestAccuracy;
  run.bestFile = "best.safetensors";
  run.savedModel = "final.safetensors";
  nlohmann::json line = lineOf(run);
  EXPECT_EQ(line["best_metric"], "test_accuracy");
  for (const char* key : {"best_step", "best_test_loss", "best_test_accuracy", "best_file"})
    EXPECT_TRUE(line[key].is_null()) << key;  // no evaluation yet
  EXPECT_EQ(line["model"], "final.safetensors");
  run.best->step = 15;
  run.best->testLoss = 0.25;
  run.best->testAccuracy = 0.9102;
  line = lineOf(run);
  EXPECT_EQ(line["best_step"], 15);
  EXPECT_EQ(line["best_test_loss"], 0.25);
  EXPECT_EQ(line["best_test_accuracy"], 0.9102);
  EXPECT_EQ(line["best_file"], "best.safetensors");
  // A checkpoint from before the accuracy was recorded: null, not NaN.
  run.best->testAccuracy = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(lineOf(run)["best_test_accuracy"].is_null());
  // Neither --save-best nor --early-stop: no best keys at all.
  run.best.reset();
  run.bestFile.reset();
  line = lineOf(run);
  for (const char* key : {"best_metric", "best_step", "best_test_loss", "best_file"})
    EXPECT_FALSE(line.contains(key)) << key;
}

}  // namespace
}  // namespace ddp::launcher
