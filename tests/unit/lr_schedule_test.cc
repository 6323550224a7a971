// Learning-rate schedules and the warm-up ramp (trainer/lr_schedule.h), on
// closed-form values.
#include "trainer/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "runtime/error.h"

namespace ddp::trainer {
namespace {

TEST(LrSchedule, ConstantAndCosineWithoutWarmUp) {
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kConstant, 0.1, 0, 100), 0.1);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kConstant, 0.1, 99, 100), 0.1);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 0, 100), 0.1);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 50, 100), 0.05, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 25, 100),
              0.05 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 100, 100), 0.0, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 150, 100), 0.0, 1e-15);  // past the plan
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 7, 0), 0.1);        // no plan: constant
}

TEST(LrSchedule, WarmUpRampsLinearlyThenTheScheduleRunsOverTheRest) {
  // 10 warm-up steps of 110: 0.01, 0.02, ... 0.1, then cosine over 100 steps.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 0, 110, 10), 0.01);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 4, 110, 10), 0.05);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 9, 110, 10), 0.1);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 10, 110, 10), 0.1);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 60, 110, 10), 0.05, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 110, 110, 10), 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kConstant, 0.1, 1, 110, 4), 0.05);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kConstant, 0.1, 50, 110, 4), 0.1);
  // A warm-up as long as the run, or longer: the ramp, then the full rate.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 19, 20, 40), 0.05);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 20, 20, 20), 0.1);
}

TEST(LrSchedule, NamesParse) {
  EXPECT_EQ(parseLrSchedule("cosine"), LrSchedule::kCosine);
  EXPECT_EQ(parseLrSchedule("constant"), LrSchedule::kConstant);
  EXPECT_STREQ(lrScheduleName(LrSchedule::kCosine), "cosine");
  EXPECT_THROW(parseLrSchedule("linear"), UsageError);
}

}  // namespace
}  // namespace ddp::trainer
