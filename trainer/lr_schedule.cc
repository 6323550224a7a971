#include "trainer/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "runtime/error.h"

namespace ddp::trainer {

LrSchedule parseLrSchedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  throw UsageError(str("--lr-schedule: unknown schedule '", name, "' (known: constant, cosine)"));
}

const char* lrScheduleName(LrSchedule schedule) {
  return schedule == LrSchedule::kCosine ? "cosine" : "constant";
}

double learningRateAt(LrSchedule schedule, double baseLr, std::size_t step,
                      std::size_t totalSteps) {
  if (schedule == LrSchedule::kConstant || totalSteps == 0) return baseLr;
  const double progress =
      std::min(1.0, static_cast<double>(step) / static_cast<double>(totalSteps));
  return baseLr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace ddp::trainer
