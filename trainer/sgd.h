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
// Note [Skipping a step on the device]
// --skip-nonfinite must decide, per step, whether to update at all. On the
// CPU the trainer reads the gradients and simply does not call step(). On a
// GPU reading a flag back would stall the host every step, so the decision
// stays on the device: a kernel raises a flag in device memory when a
// gradient is not finite, and every update kernel of the step reads that
// flag and writes nothing when it is set. The host learns which steps were
// skipped when it next reads the loss (a sync it makes anyway). With such a
// flag the host cannot know which step was the first real update, so the
// momentum buffer is not initialised from it: buffers start zeroed and every
// step applies buf = momentum * buf + g, which on a zero buffer is exactly
// g, PyTorch's first-step rule (x * 0 + g == g in floating point).
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/layer.h"

namespace ddp::trainer {

// What one update is told besides the gradients. All optional.
struct SgdStepInputs {
  // CPU parameters: the gradients are multiplied by this as they are read
  // (clipping: Note [Clipping the averaged gradient] in trainer/clip.h).
  float gradScale = 1.0f;
  // CUDA parameters (device memory): the update happens only if *deviceSkip
  // is 0 when the kernels run (Note [Skipping a step on the device]). Pass
  // it on every step of a run or on none.
  const std::int32_t* deviceSkip = nullptr;
  // CUDA parameters (device memory): gradScale, computed on the device.
  const float* deviceGradScale = nullptr;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weightDecay = 0.0f;
  bool nesterov = false;
};

class Sgd {
 public:
  Sgd(std::vector<Parameter*> parameters, SgdOptions options);
  // Applies one update from the current gradients (already averaged across ranks).
  void step(const SgdStepInputs& inputs = {});
  const SgdOptions& options() const { return options_; }
  // Changes the learning rate from the next step on (schedules).
  void setLearningRate(float lr) { options_.lr = lr; }
  // Momentum buffers, one per parameter (empty tensors before the first step).
  std::vector<Tensor>& momentumBuffers() { return buffers_; }

 private:
  std::vector<Parameter*> parameters_;
  SgdOptions options_;
  std::vector<Tensor> buffers_;
};

}  // namespace ddp::trainer
