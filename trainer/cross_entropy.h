// Softmax cross-entropy over class logits, averaged over the batch
// (PyTorch's nn.CrossEntropyLoss with reduction='mean').
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "trainer/tensor.h"

namespace ddp::trainer {

struct LossResult {
  double loss = 0.0;        // mean over the batch
  std::size_t correct = 0;  // rows whose arg-max logit is the label
};

// Running sums of batch losses and correct predictions, kept where the logits
// are: a training step on the GPU never waits for the device just to report
// its loss (the trainer reads the sums only when it logs).
class LossTotals {
 public:
  explicit LossTotals(Device device = Device::kCpu);
  Device device() const { return slots_.device(); }
  // CPU: adds directly.
  void add(double weightedLoss, double correct);
  // CUDA: the device slots the loss kernel adds into: [loss sum, correct].
  double* deviceSlots();
  // {loss sum, correct} since the last take(), then zero. Waits for the device.
  std::pair<double, double> take();

 private:
  double loss_ = 0.0;
  double correct_ = 0.0;
  Tensor slots_;  // CUDA: two doubles, stored in a float tensor of 4 elements
};

class SoftmaxCrossEntropy {
 public:
  // logits [batch, classes]; labels in [0, classes). Keeps the softmax for backward.
  LossResult forward(const Tensor& logits, std::span<const std::int32_t> labels);
  // lossScale * d(mean loss)/d(logits) = lossScale * (softmax - onehot) / batch.
  // The trainer passes 1 / world size so that summing gradients over ranks
  // averages them (Note [Averaging by pre-scaling] in trainer/trainer.cc).
  const Tensor& backward(float lossScale = 1.0f);

  // CUDA: logits and `labels` (rows int32) in device memory. Adds weight x
  // the batch's mean loss and its correct rows to `totals`, on the device,
  // without waiting; backward() then works as on the CPU.
  void forward(const Tensor& logits, const std::int32_t* labels, double weight, LossTotals& totals);

 private:
  Tensor probabilities_;
  Tensor gradLogits_;
  std::span<const std::int32_t> labels_;
  const std::int32_t* deviceLabels_ = nullptr;
  Tensor rowLoss_;  // CUDA scratch: two doubles per row
};

}  // namespace ddp::trainer
