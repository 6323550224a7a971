// SGD with momentum and weight decay, with PyTorch's update rule
// (torch.optim.SGD, dampening 0):
//   g = grad + weight_decay * p
//   buf = g                       on the first step
//   buf = momentum * buf + g      afterwards
//   g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
// Frozen (non-trainable) parameters are skipped. Parameters on a CUDA device
// are updated there, one fused kernel per tensor.
#pragma once

#include <vector>

#include "trainer/layer.h"

namespace ddp::trainer {

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
  void step();
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
