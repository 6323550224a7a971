// Learning-rate schedules, as a function of the global step, with p =
// step / totalSteps the run's progress and m the floor (--min-lr, 0 unless
// given):
//   constant: lr
//   cosine:   m + (lr - m) * (1 + cos(pi * p)) / 2, from lr down to m over
//             the run (PyTorch's CosineAnnealingLR with eta_min m, stepped
//             once per optimizer step; Megatron-Core's cosine to --min-lr)
//   linear:   m + (lr - m) * (1 - p), a straight line from lr down to m
//             (Hugging Face's get_linear_schedule_with_warmup when m is 0;
//             Megatron-Core's linear decay to --min-lr)
// With W warm-up steps, step s < W runs at lr * (s + 1) / W, a linear ramp
// whose first step already moves (Goyal et al.'s warm-up for large global
// batches, which data parallelism makes: the batch grows with the ranks);
// the schedule then runs over the remaining totalSteps - W steps, as
// Hugging Face's get_cosine_schedule_with_warmup does. The ramp starts from
// 0, not from the floor.
// The step count is global (the same on every rank), so every rank uses the
// same rate and np=1 equals np=N.
#pragma once

#include <cstddef>
#include <string>

namespace ddp::trainer {

enum class LrSchedule { kConstant, kCosine, kLinear };

// "constant" | "cosine" | "linear"; throws UsageError otherwise.
LrSchedule parseLrSchedule(const std::string& name);
const char* lrScheduleName(LrSchedule schedule);

// Whether the schedule falls over the run, so that a floor (--min-lr) means
// something: cosine and linear.
bool decays(LrSchedule schedule);

// The rate for optimizer step `step` (0-based) of `totalSteps`, the first
// `warmupSteps` of them warming up, a decaying schedule ending at `minLr`
// (0 <= minLr <= baseLr; ignored by constant).
double learningRateAt(LrSchedule schedule, double baseLr, std::size_t step, std::size_t totalSteps,
                      std::size_t warmupSteps = 0, double minLr = 0.0);

}  // namespace ddp::trainer
