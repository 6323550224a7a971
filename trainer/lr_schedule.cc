#include "trainer/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "runtime/error.h"

namespace ddp::trainer {

LrSchedule parseLrSchedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  if (name == "linear") return LrSchedule::kLinear;
  throw UsageError(
      str("--lr-schedule: unknown schedule '", name, "' (known: constant, cosine, linear)"));
}

const char* lrScheduleName(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::kCosine:
      return "cosine";
    case LrSchedule::kLinear:
      return "linear";
    case LrSchedule::kConstant:
      break;
  }
  return "constant";
}

bool decays(LrSchedule schedule) {
  return schedule != LrSchedule::kConstant;
}

double learningRateAt(LrSchedule schedule, double baseLr, std::size_t step, std::size_t totalSteps,
                      std::size_t warmupSteps, double minLr) {
  if (step < warmupSteps) {
    return baseLr * static_cast<double>(step + 1) / static_cast<double>(warmupSteps);
  }
  if (schedule == LrSchedule::kConstant || totalSteps <= warmupSteps) return baseLr;
  const double progress = std::min(
      1.0, static_cast<double>(step - warmupSteps) / static_cast<double>(totalSteps - warmupSteps));
  const double remaining = schedule == LrSchedule::kLinear
                               ? 1.0 - progress
                               : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return minLr + (baseLr - minLr) * remaining;
}

}  // namespace ddp::trainer
