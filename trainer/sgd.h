// SGD with momentum and weight decay, with PyTorch's update rule
// (torch.optim.SGD, dampening 0):
//   g = grad * scale + weight_decay * p       (scale: clipping, else 1)
//   buf = g                       on the first step
//   buf = momentum * buf + g      afterwards
//   g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
// Frozen (non-trainable) parameters are skipped. Parameters on a CUDA device
// are updated there, one fused kernel per tensor.
//
// On a GPU with --skip-nonfinite the host cannot know which step was the
// first real update (Note [Skipping a step on the device] in
// trainer/optimizer.h), so the momentum buffer is not initialised from it:
// buffers start zeroed and every step applies buf = momentum * buf + g,
// which on a zero buffer is exactly g, PyTorch's first-step rule
// (x * 0 + g == g in floating point).
#pragma once

#include <vector>

#include "trainer/optimizer.h"

namespace ddp::trainer {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weightDecay = 0.0f;
  bool nesterov = false;
  bool decayBiases = true;  // weightDecayOf (trainer/optimizer.h)
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<Parameter*> parameters, SgdOptions options);
  void step(const StepInputs& inputs = {}) override;
  float learningRate() const override { return options_.lr; }
  void setLearningRate(float lr) override { options_.lr = lr; }
  // "momentum.<parameter>" for each trainable parameter; none without momentum.
  std::vector<OptimizerState> state() override;
  const char* name() const override { return "sgd"; }
  const SgdOptions& options() const { return options_; }
  // Momentum buffers, one per parameter (empty tensors before the first step).
  std::vector<Tensor>& momentumBuffers() { return buffers_; }

 private:
  std::vector<Parameter*> parameters_;
  SgdOptions options_;
  std::vector<Tensor> buffers_;
};

}  // namespace ddp::trainer
