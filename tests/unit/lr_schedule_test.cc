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

TEST(LrSchedule, LinearFallsAlongAStraightLine) {
  // Hugging Face's get_linear_schedule_with_warmup: (T - s) / (T - W) of lr.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kLinear, 0.1, 0, 100), 0.1);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 25, 100), 0.075, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 99, 100), 0.001, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 100, 100), 0.0, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 150, 100), 0.0, 1e-15);  // past the plan
  // 10 warm-up steps, then 100 falling ones.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kLinear, 0.1, 4, 110, 10), 0.05);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kLinear, 0.1, 10, 110, 10), 0.1);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 85, 110, 10), 0.025, 1e-15);
}

TEST(LrSchedule, MinLrIsWhereCosineAndLinearEnd) {
  // m + (lr - m) x what is left of the fall, as CosineAnnealingLR's eta_min.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 0, 100, 0, 0.02), 0.1);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 50, 100, 0, 0.02), 0.06, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 25, 100, 0, 0.02),
              0.02 + 0.04 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 100, 100, 0, 0.02), 0.02, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 150, 100, 0, 0.02), 0.02, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 75, 100, 0, 0.02), 0.04, 1e-15);
  EXPECT_NEAR(learningRateAt(LrSchedule::kLinear, 0.1, 100, 100, 0, 0.02), 0.02, 1e-15);
  // The warm-up ramps from 0, not from the floor; constant has no floor.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kCosine, 0.1, 0, 110, 10, 0.02), 0.01);
  EXPECT_NEAR(learningRateAt(LrSchedule::kCosine, 0.1, 60, 110, 10, 0.02), 0.06, 1e-15);
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kConstant, 0.1, 99, 100, 0, 0.02), 0.1);
  // A floor equal to lr: no fall at all.
  EXPECT_DOUBLE_EQ(learningRateAt(LrSchedule::kLinear, 0.1, 60, 100, 0, 0.1), 0.1);
}

// Without a floor the cosine is computed as it was before --min-lr existed,
// bit for bit: a checkpoint of an older run resumes onto the same rates.
TEST(LrSchedule, NoFloorKeepsTheEarlierCosineExactly) {
  for (std::size_t step = 0; step <= 100; ++step) {
    const double progress = static_cast<double>(step) / 100.0;
    EXPECT_EQ(learningRateAt(LrSchedule::kCosine, 0.3, step, 100),
              0.3 * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)))
        << step;
  }
}

TEST(LrSchedule, NamesParse) {
  EXPECT_EQ(parseLrSchedule("cosine"), LrSchedule::kCosine);
  EXPECT_EQ(parseLrSchedule("constant"), LrSchedule::kConstant);
  EXPECT_EQ(parseLrSchedule("linear"), LrSchedule::kLinear);
  for (LrSchedule schedule : {LrSchedule::kConstant, LrSchedule::kCosine, LrSchedule::kLinear})
    EXPECT_EQ(parseLrSchedule(lrScheduleName(schedule)), schedule);
  EXPECT_FALSE(decays(LrSchedule::kConstant));
  EXPECT_TRUE(decays(LrSchedule::kCosine));
  EXPECT_TRUE(decays(LrSchedule::kLinear));
  try {
    parseLrSchedule("step");
    FAIL() << "an unknown schedule was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--lr-schedule: unknown schedule 'step' (known: constant, cosine, linear)");
  }
}

}  // namespace
}  // namespace ddp::trainer
