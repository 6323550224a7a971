// Softmax cross-entropy over class logits, averaged over the batch
// (PyTorch's nn.CrossEntropyLoss with reduction='mean').
#pragma once

#include <cstdint>
#include <span>

#include "trainer/tensor.h"

namespace ddp::trainer {

struct LossResult {
  double loss = 0.0;        // mean over the batch
  std::size_t correct = 0;  // rows whose arg-max logit is the label
};

class SoftmaxCrossEntropy {
 public:
  // logits [batch, classes]; labels in [0, classes). Keeps the softmax for backward.
  LossResult forward(const Tensor& logits, std::span<const std::int32_t> labels);
  // lossScale * d(mean loss)/d(logits) = lossScale * (softmax - onehot) / batch.
  // The trainer passes 1 / world size so that summing gradients over ranks
  // averages them (Note [Averaging by pre-scaling] in trainer/trainer.cc).
  const Tensor& backward(float lossScale = 1.0f);

 private:
  Tensor probabilities_;
  Tensor gradLogits_;
  std::span<const std::int32_t> labels_;
};

}  // namespace ddp::trainer
