// Note [Keeping the best weights]: which evaluation is the best so far and
// how many came since, from a fresh start and from a resumed checkpoint's
// record.
#include "launcher/best_evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ddp::launcher {
namespace {

TEST(BestEvaluation, TheFirstEvaluationIsTheBestThenOnlyALowerLoss) {
  BestEvaluation best{trainer::TrainPosition{}};
  EXPECT_TRUE(best.observe(2.5, 10));
  EXPECT_EQ(best.sinceBest(), 0u);
  EXPECT_EQ(best.savedText("best.st"),
            "saved the best weights so far (test_loss 2.5000 after step 10) to best.st "
            "(--save-best)");
  EXPECT_FALSE(best.observe(2.5, 20));  // a tie keeps the earlier weights
  EXPECT_FALSE(best.observe(3.0, 30));
  EXPECT_EQ(best.sinceBest(), 2u);
  EXPECT_EQ(best.earlyStopText(2),
            "stopped early: 2 evaluations in a row did not lower the test loss (the lowest, "
            "2.5000 after step 10; --early-stop 2)");
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.bestTestLoss, 2.5);
  EXPECT_EQ(at.bestStep, 10u);
  EXPECT_EQ(at.evaluationsSinceBest, 2u);
  EXPECT_TRUE(best.observe(2.4, 40));
  EXPECT_EQ(best.sinceBest(), 0u);
}

TEST(BestEvaluation, ANanIsNeverTheBestNorAnInfinityBetterThanALoss) {
  BestEvaluation best{trainer::TrainPosition{}};
  EXPECT_FALSE(best.observe(std::nan(""), 5));
  EXPECT_EQ(best.sinceBest(), 1u);
  EXPECT_EQ(best.earlyStopText(1),
            "stopped early: 1 evaluation in a row did not lower the test loss (none finite; "
            "--early-stop 1)");
  EXPECT_TRUE(best.observe(std::numeric_limits<double>::infinity(), 10));
  EXPECT_TRUE(best.observe(0.7, 15));
  EXPECT_FALSE(best.observe(std::nan(""), 20));
  EXPECT_FALSE(best.observe(std::numeric_limits<double>::infinity(), 25));
  EXPECT_EQ(best.sinceBest(), 2u);
}

// A resumed run goes on from its checkpoint's record: only a lower loss
// replaces the file the stopped run wrote, and the evaluations since the
// best count on.
TEST(BestEvaluation, AResumedRunGoesOnFromTheCheckpointsRecord) {
  trainer::TrainPosition resumed;
  resumed.globalStep = 300;
  resumed.bestTestLoss = 0.36;
  resumed.bestStep = 100;
  resumed.evaluationsSinceBest = 4;
  BestEvaluation best(resumed);
  EXPECT_EQ(best.sinceBest(), 4u);
  EXPECT_FALSE(best.observe(0.5, 320));
  EXPECT_EQ(best.sinceBest(), 5u);
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.bestStep, 100u);
  EXPECT_EQ(at.bestTestLoss, 0.36);
  EXPECT_EQ(at.evaluationsSinceBest, 5u);
  EXPECT_TRUE(best.observe(0.35, 340));
}

}  // namespace
}  // namespace ddp::launcher
