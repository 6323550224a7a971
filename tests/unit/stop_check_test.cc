// How far apart the stop checks are (Note [How often the ranks check for a
// stop] in trainer/trainer.h).
#include <gtest/gtest.h>

#include <limits>

#include "trainer/trainer.h"

namespace ddp::trainer {
namespace {

TEST(StopCheck, FastStepsKeepTheMostSlowOnesFitTheSecondsAtLeastOne) {
  EXPECT_EQ(stepsToNextCheck(0.008, 1.0, 10), 10u);  // 10 steps of 8 ms: 0.08 s
  EXPECT_EQ(stepsToNextCheck(0.1, 1.0, 10), 10u);
  EXPECT_EQ(stepsToNextCheck(0.15, 1.0, 10), 6u);
  EXPECT_EQ(stepsToNextCheck(0.3, 1.0, 10), 3u);
  EXPECT_EQ(stepsToNextCheck(0.6, 1.0, 10), 1u);
  EXPECT_EQ(stepsToNextCheck(30.0, 1.0, 10), 1u);  // never none
  EXPECT_EQ(stepsToNextCheck(0.3, 1.0, 2), 2u);    // never more than the most
}

TEST(StopCheck, NoMeasureYetKeepsTheMost) {
  EXPECT_EQ(stepsToNextCheck(0.0, 1.0, 10), 10u);
  EXPECT_EQ(stepsToNextCheck(std::numeric_limits<double>::quiet_NaN(), 1.0, 10), 10u);
  EXPECT_EQ(stepsToNextCheck(1e-30, 1.0, 10), 10u);  // no overflow of the step count
}

}  // namespace
}  // namespace ddp::trainer
