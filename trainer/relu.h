// ReLU: y = max(x, 0). Backward passes the gradient where the output is positive.
#pragma once

#include "trainer/layer.h"

namespace ddp::trainer {

class Relu final : public Layer {
 public:
  std::string describe() const override { return "ReLU()"; }
  const Tensor& forward(const Tensor& input) override;
  const Tensor* backward(const Tensor& gradOutput, GradMode mode, bool needInputGrad) override;

 private:
  Tensor output_;
  Tensor gradInput_;
};

}  // namespace ddp::trainer
