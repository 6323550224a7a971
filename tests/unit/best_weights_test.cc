// Note [Keeping the best weights]: which evaluation is the best so far, from
// a fresh start and from a resumed checkpoint's record.
#include "launcher/best_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ddp::launcher {
namespace {

TEST(BestWeights, TheFirstEvaluationIsTheBestThenOnlyALowerLoss) {
  BestWeights best("best.st", trainer::TrainPosition{});
  EXPECT_TRUE(best.isBest(2.5));
  best.record(2.5, 10);
  EXPECT_EQ(best.savedText(),
            "saved the best weights so far (test_loss 2.5000 after step 10) to best.st "
            "(--save-best)");
  EXPECT_FALSE(best.isBest(2.5));  // a tie keeps the earlier weights
  EXPECT_FALSE(best.isBest(3.0));
  EXPECT_TRUE(best.isBest(2.4));
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.bestTestLoss, 2.5);
  EXPECT_EQ(at.bestStep, 10u);
}

TEST(BestWeights, ANanIsNeverTheBestNorAnInfinityBetterThanALoss) {
  BestWeights best("best.st", trainer::TrainPosition{});
  EXPECT_FALSE(best.isBest(std::nan("")));
  EXPECT_TRUE(best.isBest(std::numeric_limits<double>::infinity()));
  best.record(0.7, 5);
  EXPECT_FALSE(best.isBest(std::nan("")));
  EXPECT_FALSE(best.isBest(std::numeric_limits<double>::infinity()));
}

// A resumed run goes on from the best its checkpoint records: only a lower
// loss replaces the file the stopped run wrote.
TEST(BestWeights, AResumedRunGoesOnFromTheCheckpointsBest) {
  trainer::TrainPosition resumed;
  resumed.globalStep = 300;
  resumed.bestTestLoss = 0.36;
  resumed.bestStep = 100;
  BestWeights best("best.st", resumed);
  EXPECT_FALSE(best.isBest(0.5));
  EXPECT_TRUE(best.isBest(0.35));
  trainer::TrainPosition at;
  best.markIn(at);
  EXPECT_EQ(at.bestStep, 100u);
  EXPECT_EQ(at.bestTestLoss, 0.36);
}

}  // namespace
}  // namespace ddp::launcher
