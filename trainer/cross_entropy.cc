#include "trainer/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace ddp::trainer {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits,
                                        std::span<const std::int32_t> labels) {
  const std::size_t batch = logits.dim(0), classes = logits.dim(1);
  DDP_CHECK(labels.size() == batch, "cross-entropy: labels and logits disagree on the batch size");
  probabilities_.resize(logits.shape());
  labels_ = labels;
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

const Tensor& SoftmaxCrossEntropy::backward(float lossScale) {
  const std::size_t batch = probabilities_.dim(0), classes = probabilities_.dim(1);
  gradLogits_.resize(probabilities_.shape());
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
