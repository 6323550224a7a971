// AdamW with PyTorch's update rule (torch.optim.AdamW, amsgrad off), per
// element of every trainable parameter:
//   t += 1                                  (one count for the whole model)
//   p *= 1 - lr * weight_decay              (decoupled weight decay)
//   g  = grad * scale                       (scale: clipping, else 1)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The bias corrections are computed once per step in double, as PyTorch does
// on the host; the element-wise work is float32, in PyTorch's order.
//
// State (Note [Optimizer state in checkpoints] in trainer/optimizer.h):
// "exp_avg.<parameter>" (m) and "exp_avg_sq.<parameter>" (v) for each
// trainable parameter, and "step" (t), one float32 as PyTorch keeps it: exact
// up to 2^24 steps, past which 1 - beta^t is 1 to float precision anyway. All
// created zeroed by the first step, which is then the rule above with t = 1.
//
// On a GPU, t lives in device memory (Note [Skipping a step on the device]):
// each step a one-thread kernel counts the step unless the skip flag is
// raised and computes the step's two factors; then one fused kernel per
// parameter reads them. No host synchronisation.
#pragma once

#include <vector>

#include "trainer/optimizer.h"

namespace ddp::trainer {

struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.01f;
  bool decayBiases = true;  // weightDecayOf (trainer/optimizer.h)
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<Parameter*> parameters, AdamWOptions options);
  void step(const StepInputs& inputs = {}) override;
  float learningRate() const override { return options_.lr; }
  void setLearningRate(float lr) override { options_.lr = lr; }
  std::vector<OptimizerState> state() override;
  const char* name() const override { return "adamw"; }
  const AdamWOptions& options() const { return options_; }

 private:
  // Zeroed state for every slot (the first step).
  void createState();
  // 1 - lr * weight_decay for `param`: what decoupled decay multiplies it by.
  float decayFactor(const Parameter& param) const;
  void stepOnHost(float gradScale);
  void stepOnDevice(const StepInputs& inputs);

  std::vector<Parameter*> parameters_;
  AdamWOptions options_;
  std::vector<Tensor> expAvg_, expAvgSq_;  // per parameter; empty for frozen ones
  Tensor step_;                            // [1]: t
  Tensor deviceFactors_;                   // [2], GPU runs: this step's factors
};

}  // namespace ddp::trainer
