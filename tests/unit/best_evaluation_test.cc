// Note [Keeping the best weights]: which evaluation is the best so far by
// either metric and how many came since, from a fresh start and from a
// resumed checkpoint's record, and what --save-best's file records of it.
#include "launcher/best_evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "test_files.h"
#include "trainer/mlp.h"
#include "trainer/sgd.h"

namespace ddp::launcher {
namespace {

using trainer::BestMetric;
using trainer::BestRecord;
using trainer::EvalResult;

EvalResult lossOf(double loss) {
  return EvalResult{loss, 0.5, 100};
}
EvalResult accuracyOf(double accuracy, double loss = 1.0) {
  return EvalResult{loss, accuracy, 100};
}

TEST(BestEvaluation, TheFirstEvaluationIsTheBestThenOnlyALowerLoss) {
  BestEvaluation best(BestMetric::kTestLoss, 0.0, BestRecord{});
  EXPECT_TRUE(best.observe(lossOf(2.5), 10));
  EXPECT_EQ(best.sinceImproved(), 0u);
  EXPECT_EQ(best.savedText("best.st"),
            "saved the best weights so far (test_loss 2.5000 after step 10) to best.st "
            "(--save-best)");
  EXPECT_FALSE(best.observe(lossOf(2.5), 20));                // a tie keeps the earlier weights
  EXPECT_FALSE(best.observe(EvalResult{3.0, 0.9, 100}, 30));  // a better accuracy is not asked
  EXPECT_EQ(best.sinceImproved(), 2u);
  EXPECT_EQ(best.earlyStopText(2),
            "stopped early: 2 evaluations in a row did not lower the test loss (the lowest, "
            "2.5000 after step 10; --early-stop 2)");
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.best.metric, BestMetric::kTestLoss);
  EXPECT_EQ(at.best.testLoss, 2.5);
  EXPECT_EQ(at.best.testAccuracy, 0.5);
  EXPECT_EQ(at.best.step, 10u);
  EXPECT_EQ(at.best.evaluationsSince, 2u);
  EXPECT_TRUE(best.observe(lossOf(2.4), 40));
  EXPECT_EQ(best.sinceImproved(), 0u);
}

TEST(BestEvaluation, ANanIsNeverTheBestNorAnInfinityBetterThanALoss) {
  BestEvaluation best(BestMetric::kTestLoss, 0.0, BestRecord{});
  EXPECT_FALSE(best.observe(lossOf(std::nan("")), 5));
  EXPECT_EQ(best.sinceImproved(), 1u);
  EXPECT_EQ(best.earlyStopText(1),
            "stopped early: 1 evaluation in a row did not lower the test loss (none finite; "
            "--early-stop 1)");
  EXPECT_TRUE(best.observe(lossOf(std::numeric_limits<double>::infinity()), 10));
  EXPECT_TRUE(best.observe(lossOf(0.7), 15));
  EXPECT_FALSE(best.observe(lossOf(std::nan("")), 20));
  EXPECT_FALSE(best.observe(lossOf(std::numeric_limits<double>::infinity()), 25));
  EXPECT_EQ(best.sinceImproved(), 2u);
}

// A loss that diverged from the start is still the best of its run; its
// figures read as the progress lines print them (fixedOrExponent).
TEST(BestEvaluation, AHugeLossReadsInExponentForm) {
  BestEvaluation best(BestMetric::kTestLoss, 0.0, BestRecord{});
  EXPECT_TRUE(best.observe(lossOf(5.413e24), 10));
  EXPECT_FALSE(best.observe(lossOf(6e24), 20));
  EXPECT_EQ(best.earlyStopText(1),
            "stopped early: 1 evaluation in a row did not lower the test loss (the lowest, "
            "5.4130e+24 after step 10; --early-stop 1)");
}

// --best-metric test_accuracy: only a higher accuracy is better, whatever
// the loss does; a tie (frequent: a count of hits) keeps the earlier weights.
TEST(BestEvaluation, ByAccuracyOnlyAHigherAccuracyIsBetter) {
  BestEvaluation best(BestMetric::kTestAccuracy, 0.0, BestRecord{});
  EXPECT_TRUE(best.observe(accuracyOf(0.80, 0.6), 10));
  EXPECT_FALSE(best.observe(accuracyOf(0.80, 0.4), 20));  // a tie, a lower loss
  EXPECT_FALSE(best.observe(accuracyOf(0.79, 0.3), 30));
  EXPECT_FALSE(best.observe(accuracyOf(std::nan("")), 35));
  EXPECT_EQ(best.earlyStopText(3),
            "stopped early: 3 evaluations in a row did not raise the test accuracy (the highest, "
            "0.8000 after step 10; --early-stop 3)");
  EXPECT_TRUE(best.observe(accuracyOf(0.85, 0.9), 40));  // a higher loss does not matter
  EXPECT_EQ(best.savedText("best.st"),
            "saved the best weights so far (test_accuracy 0.8500 after step 40) to best.st "
            "(--save-best)");
  const trainer::ModelOrigin origin = best.origin();
  EXPECT_EQ(origin.step, 40u);
  EXPECT_EQ(origin.savedBy, "--save-best");
  EXPECT_EQ(origin.chosenBy, BestMetric::kTestAccuracy);
  ASSERT_TRUE(origin.evaluation);
  EXPECT_EQ(origin.evaluation->loss, 0.9);
  EXPECT_EQ(origin.evaluation->accuracy, 0.85);
  EXPECT_EQ(origin.evaluation->samples, 100u);
}

// A resumed run goes on from its checkpoint's record: only a better result
// replaces the file the stopped run wrote, and the evaluations since the
// best count on.
TEST(BestEvaluation, AResumedRunGoesOnFromTheCheckpointsRecord) {
  BestRecord resumed;
  resumed.step = 100;
  resumed.testLoss = 0.36;
  resumed.testAccuracy = 0.9;
  resumed.evaluationsSince = 4;
  BestEvaluation best(BestMetric::kTestLoss, 0.0, resumed);
  EXPECT_FALSE(best.resumeNotice());
  EXPECT_EQ(best.sinceImproved(), 4u);
  // A record from before the sample count was kept: a restored file's
  // origin leaves the figures out rather than give a count of 0.
  EXPECT_EQ(best.origin().step, 100u);
  EXPECT_FALSE(best.origin().evaluation);
  EXPECT_FALSE(best.observe(lossOf(0.5), 320));
  EXPECT_EQ(best.sinceImproved(), 5u);
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.best.step, 100u);
  EXPECT_EQ(at.best.testLoss, 0.36);
  EXPECT_EQ(at.best.testAccuracy, 0.9);
  EXPECT_EQ(at.best.evaluationsSince, 5u);
  EXPECT_TRUE(best.observe(lossOf(0.35), 340));
}

// Note [How much better counts for --early-stop]: with a minimum delta, only
// an evaluation more than it below the reference counts (and becomes the
// reference), so small gains add up until one does; --save-best still takes
// every lower loss.
TEST(BestEvaluation, AMinimumDeltaCountsOnlyALargerStepFromTheReference) {
  BestEvaluation best(BestMetric::kTestLoss, 0.25, BestRecord{});
  EXPECT_TRUE(best.observe(lossOf(2.0), 10));  // the first is the reference
  EXPECT_EQ(best.sinceImproved(), 0u);
  EXPECT_TRUE(best.observe(lossOf(1.875), 20));  // the best, not 0.25 below 2
  EXPECT_EQ(best.sinceImproved(), 1u);
  EXPECT_TRUE(best.observe(lossOf(1.75), 30));  // exactly 0.25 below: not more than
  EXPECT_EQ(best.sinceImproved(), 2u);
  EXPECT_TRUE(best.observe(lossOf(1.625), 40));  // the gains add up
  EXPECT_EQ(best.sinceImproved(), 0u);
  EXPECT_TRUE(best.observe(lossOf(1.5), 50));
  EXPECT_FALSE(best.observe(lossOf(1.6), 60));
  EXPECT_EQ(best.sinceImproved(), 2u);
  EXPECT_EQ(best.earlyStopText(2),
            "stopped early: 2 evaluations in a row did not lower the test loss by more than 0.25 "
            "below 1.6250 (after step 40; the lowest, 1.5000 after step 50; --early-stop 2, "
            "--early-stop-min-delta 0.25)");
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.best.step, 50u);
  EXPECT_EQ(at.best.testLoss, 1.5);
  EXPECT_EQ(at.best.referenceStep, 40u);
  EXPECT_EQ(at.best.referenceValue, 1.625);
  EXPECT_EQ(at.best.evaluationsSince, 2u);
  EXPECT_FALSE(best.observe(lossOf(std::nan("")), 70));  // counts, as without a delta
  EXPECT_EQ(best.sinceImproved(), 3u);
}

TEST(BestEvaluation, AMinimumDeltaByAccuracyCountsOnlyAHigherOne) {
  BestEvaluation best(BestMetric::kTestAccuracy, 0.125, BestRecord{});
  EXPECT_TRUE(best.observe(accuracyOf(0.5), 10));
  EXPECT_TRUE(best.observe(accuracyOf(0.5625), 20));
  EXPECT_EQ(best.sinceImproved(), 1u);
  EXPECT_TRUE(best.observe(accuracyOf(0.75), 30));
  EXPECT_EQ(best.sinceImproved(), 0u);
  EXPECT_FALSE(best.observe(accuracyOf(0.5, 0.1), 40));  // a lower loss does not count
  // The reference is the best: named once.
  EXPECT_EQ(best.earlyStopText(1),
            "stopped early: 1 evaluation in a row did not raise the test accuracy by more than "
            "0.125 (the highest, 0.7500 after step 30; --early-stop 1, --early-stop-min-delta "
            "0.125)");
}

// A resumed run counts from the checkpoint's reference; one written before
// the reference was recorded (no minimum delta then) counts from its best.
TEST(BestEvaluation, AResumedRunCountsFromTheRecordedReference) {
  BestRecord recorded;
  recorded.step = 100;
  recorded.testLoss = 0.5;
  recorded.referenceStep = 80;
  recorded.referenceValue = 0.625;
  recorded.evaluationsSince = 2;
  BestEvaluation resumed(BestMetric::kTestLoss, 0.125, recorded);
  EXPECT_TRUE(resumed.observe(lossOf(0.4375), 120));  // 0.1875 below the reference
  EXPECT_EQ(resumed.sinceImproved(), 0u);

  BestRecord older = recorded;
  older.referenceStep = 0;
  BestEvaluation fromBest(BestMetric::kTestLoss, 0.125, older);
  EXPECT_TRUE(fromBest.observe(lossOf(0.4375), 120));  // only 0.0625 below the best
  EXPECT_EQ(fromBest.sinceImproved(), 3u);
  trainer::TrainPosition at;
  fromBest.markIn(at);
  EXPECT_EQ(at.best.referenceStep, 100u);
  EXPECT_EQ(at.best.referenceValue, 0.5);
}

// A record another metric judged does not compare: the resumed run starts a
// new one, and says so.
TEST(BestEvaluation, ARecordOfAnotherMetricIsSetAside) {
  BestRecord resumed;
  resumed.metric = BestMetric::kTestLoss;
  resumed.step = 100;
  resumed.testLoss = 0.36;
  resumed.testAccuracy = 0.9;
  resumed.evaluationsSince = 4;
  BestEvaluation best(BestMetric::kTestAccuracy, 0.0, resumed);
  ASSERT_TRUE(best.resumeNotice());
  EXPECT_EQ(*best.resumeNotice(),
            "--best-metric test_accuracy: the checkpoint's best evaluation (after step 100) was "
            "judged by test_loss, so the run starts a new record (--save-best's file is replaced "
            "at the next evaluation, --early-stop counts from it)");
  EXPECT_EQ(best.sinceImproved(), 0u);
  EXPECT_TRUE(best.observe(accuracyOf(0.5), 320));  // lower than the old record's 0.9
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.best.metric, BestMetric::kTestAccuracy);
  EXPECT_EQ(at.best.step, 320u);
}

// Note [A resumed run's best file]: a FILE that holds the recorded best is
// left alone; one that is gone, damaged or holds other weights is written
// again from the checkpoint of the best step, with the best's record; with
// no such checkpoint a warning says so.
TEST(BestFile, IsWrittenAgainFromTheCheckpointOfTheBestStep) {
  ddp::testing::TempDir dir;
  auto model = trainer::buildMlp(3, {4}, 2, 1);
  trainer::Sgd sgd(model->parameters(), {0.1f, 0.9f, 0.0f, false});
  BestRecord record;
  record.step = 40;
  record.testLoss = 0.25;
  record.testAccuracy = 0.75;
  record.testSamples = 100;
  const BestEvaluation best(BestMetric::kTestLoss, 0.0, record);
  const std::string path = dir.file("best.st");

  const auto missing = restoreBestFile(path, best, dir.file("ck"), *model);
  ASSERT_TRUE(missing);
  EXPECT_TRUE(missing->warning);
  EXPECT_EQ(missing->text,
            "--save-best " + path +
                ": is not there, and the best weights the checkpoint records (test_loss 0.2500 "
                "after step 40) are in no checkpoint in " +
                dir.file("ck") +
                " (none was written at step 40, or --keep-checkpoints deleted it): " + path +
                " is written again only at an evaluation better than that");

  std::filesystem::create_directory(dir.file("ck"));
  const std::string checkpoint = trainer::checkpointPath(dir.file("ck"), 40);
  trainer::saveCheckpoint(checkpoint, *model, sgd, trainer::TrainPosition{}, {});
  std::ofstream(path) << "not a safetensors file";
  const auto damaged = restoreBestFile(path, best, dir.file("ck"), *model);
  ASSERT_TRUE(damaged);
  EXPECT_FALSE(damaged->warning);
  EXPECT_EQ(damaged->text.find("--save-best " + path + ": cannot be read ("), 0u) << damaged->text;
  EXPECT_NE(damaged->text.find("; wrote the best weights the checkpoint records (test_loss 0.2500 "
                               "after step 40) to it again, from " +
                               checkpoint),
            std::string::npos)
      << damaged->text;
  auto fresh = trainer::buildMlp(3, {4}, 2, 2);
  const trainer::WeightsSource source = trainer::loadWeights(path, *fresh);
  ASSERT_TRUE(source.origin);
  EXPECT_EQ(trainer::originText(*source.origin),
            "the weights of step 40 (--save-best by test_loss; evaluated then: test_loss 0.2500, "
            "test_acc 75.00% on 100 samples)");
  const auto a = model->parameters(), b = fresh->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t j = 0; j < a[i]->value.numel(); ++j)
      ASSERT_EQ(a[i]->value.data()[j], b[i]->value.data()[j]) << a[i]->name;
  }
  EXPECT_FALSE(restoreBestFile(path, best, dir.file("ck"), *model));  // it holds the best now
  EXPECT_FALSE(restoreBestFile(path, BestEvaluation(BestMetric::kTestLoss, 0.0, BestRecord{}),
                               dir.file("ck"), *model));  // no best yet
}

}  // namespace
}  // namespace ddp::launcher
