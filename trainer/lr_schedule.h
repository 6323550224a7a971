// Learning-rate schedules, as a function of the global step.
//   constant: lr
//   cosine:   lr * (1 + cos(pi * step / totalSteps)) / 2, from lr down to 0
//             over the run (PyTorch's CosineAnnealingLR with eta_min 0,
//             stepped once per optimizer step).
// With W warm-up steps, step s < W runs at lr * (s + 1) / W, a linear ramp
// whose first step already moves (Goyal et al.'s warm-up for large global
// batches, which data parallelism makes: the batch grows with the ranks);
// the schedule then runs over the remaining totalSteps - W steps, as
// Hugging Face's get_cosine_schedule_with_warmup does.
// The step count is global (the same on every rank), so every rank uses the
// same rate and np=1 equals np=N.
#pragma once

#include <cstddef>
#include <string>

namespace ddp::trainer {

enum class LrSchedule { kConstant, kCosine };

// "constant" | "cosine"; throws UsageError otherwise.
LrSchedule parseLrSchedule(const std::string& name);
const char* lrScheduleName(LrSchedule schedule);

// The rate for optimizer step `step` (0-based) of `totalSteps`, the first
// `warmupSteps` of them warming up.
double learningRateAt(LrSchedule schedule, double baseLr, std::size_t step, std::size_t totalSteps,
                      std::size_t warmupSteps = 0);

}  // namespace ddp::trainer
