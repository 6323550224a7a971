#include "trainer/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "ddp_config.h"
#include "runtime/error.h"
#if DDP_WITH_CUDA
#include "runtime/cuda/memory.h"
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {

LossTotals::LossTotals(Device device) {
  if (device == Device::kCuda) slots_ = Tensor({4}, Device::kCuda);  // 2 doubles
}

void LossTotals::add(double weightedLoss, double correct) {
  DDP_CHECK(!slots_.onCuda(), "LossTotals::add on device totals");
  loss_ += weightedLoss;
  correct_ += correct;
}

double* LossTotals::deviceSlots() {
  DDP_CHECK(slots_.onCuda(), "LossTotals::deviceSlots on host totals");
  return reinterpret_cast<double*>(slots_.data());
}

std::pair<double, double> LossTotals::take() {
  if (slots_.onCuda()) {
#if DDP_WITH_CUDA
    double values[2] = {0.0, 0.0};
    ddp::cuda::copyToHost(values, slots_.data(), sizeof values);
    slots_.fill(0.0f);  // all-zero bits: two 0.0 doubles
    return {values[0], values[1]};
#endif
  }
  const std::pair<double, double> result{loss_, correct_};
  loss_ = correct_ = 0.0;
  return result;
}

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits,
                                        std::span<const std::int32_t> labels) {
  const std::size_t batch = logits.dim(0), classes = logits.dim(1);
  DDP_CHECK(labels.size() == batch, "cross-entropy: labels and logits disagree on the batch size");
  DDP_CHECK(!logits.onCuda(), "cross-entropy: CUDA logits need device labels");
  probabilities_.resize(logits.shape(), Device::kCpu);
  labels_ = labels;
  deviceLabels_ = nullptr;
  LossResult result;
  double lossSum = 0.0;
  for (std::size_t r = 0; r < batch; ++r) {
    const float* z = logits.data() + r * classes;
    float* p = probabilities_.data() + r * classes;
    const std::size_t argmax = std::max_element(z, z + classes) - z;
    const float zmax = z[argmax];
    double sum = 0.0;
    for (std::size_t c = 0; c < classes; ++c) {
      p[c] = std::exp(z[c] - zmax);
      sum += p[c];
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (std::size_t c = 0; c < classes; ++c)
      p[c] *= inv;
    const auto label = static_cast<std::size_t>(labels[r]);
    DDP_CHECK(label < classes, "cross-entropy: label out of range");
    // -log softmax = log(sum) - (z_label - zmax): exact even when p underflows.
    lossSum += std::log(sum) - static_cast<double>(z[label] - zmax);
    if (argmax == label) ++result.correct;
  }
  result.loss = batch > 0 ? lossSum / static_cast<double>(batch) : 0.0;
  return result;
}

void SoftmaxCrossEntropy::forward(const Tensor& logits, const std::int32_t* labels, double weight,
                                  LossTotals& totals) {
  DDP_CHECK(logits.onCuda() && totals.device() == Device::kCuda,
            "cross-entropy: device labels need CUDA logits and totals");
  const std::size_t batch = logits.dim(0), classes = logits.dim(1);
  probabilities_.resize(logits.shape(), Device::kCuda);
  rowLoss_.resize({4 * batch}, Device::kCuda);  // 2 doubles per row
  labels_ = {};
  deviceLabels_ = labels;
#if DDP_WITH_CUDA
  const auto slots = totals.deviceSlots();
  cuda::softmaxCrossEntropyForward(logits.data(), labels, probabilities_.data(),
                                   reinterpret_cast<double*>(rowLoss_.data()), batch, classes,
                                   weight, slots, slots + 1);
#else
  (void)batch, (void)classes, (void)weight;
#endif
}

const Tensor& SoftmaxCrossEntropy::backward(float lossScale) {
  const std::size_t batch = probabilities_.dim(0), classes = probabilities_.dim(1);
  gradLogits_.resize(probabilities_.shape(), probabilities_.device());
  if (probabilities_.onCuda()) {
#if DDP_WITH_CUDA
    cuda::softmaxCrossEntropyBackward(probabilities_.data(), deviceLabels_, gradLogits_.data(),
                                      batch, classes, lossScale);
#endif
    return gradLogits_;
  }
  const float scale = lossScale / static_cast<float>(batch);
  const float* p = probabilities_.data();
  float* g = gradLogits_.data();
  for (std::size_t r = 0; r < batch; ++r) {
    for (std::size_t c = 0; c < classes; ++c)
      g[r * classes + c] = p[r * classes + c] * scale;
    g[r * classes + static_cast<std::size_t>(labels_[r])] -= scale;
  }
  return gradLogits_;
}

}  // namespace ddp::trainer
