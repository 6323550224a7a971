#include "trainer/linear.h"

#include <cblas.h>

#include <cmath>

#include "runtime/error.h"
#include "trainer/random.h"

namespace ddp::trainer {

Linear::Linear(std::size_t inFeatures, std::size_t outFeatures, const std::string& prefix,
               std::uint64_t seed)
    : in_(inFeatures), out_(outFeatures) {
  weight_ = Parameter{prefix + "weight", Tensor({out_, in_}), Tensor({out_, in_}), true};
  bias_ = Parameter{prefix + "bias", Tensor({out_}), Tensor({out_}), true};
  Random random(seed);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  for (float& w : weight_.value.span())
    w = random.uniform(-bound, bound);
  for (float& b : bias_.value.span())
    b = random.uniform(-bound, bound);
}

std::string Linear::describe() const {
  return str("Linear(", in_, ", ", out_, ")");
}

const Tensor& Linear::forward(const Tensor& input) {
  DDP_CHECK(input.shape().size() == 2 && input.dim(1) == in_,
            str(describe(), " got input ", shapeString(input.shape())));
  const std::size_t batch = input.dim(0);
  input_ = &input;
  output_.resize({batch, out_});
  // Broadcast the bias into every row, then y += x W^T (beta = 1).
  float* y = output_.data();
  const float* b = bias_.value.data();
  for (std::size_t r = 0; r < batch; ++r)
    std::copy(b, b + out_, y + r * out_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(batch),
              static_cast<int>(out_), static_cast<int>(in_), 1.0f, input.data(),
              static_cast<int>(in_), weight_.value.data(), static_cast<int>(in_), 1.0f, y,
              static_cast<int>(out_));
  return output_;
}

const Tensor* Linear::backward(const Tensor& gradOutput, GradMode mode, bool needInputGrad) {
  DDP_CHECK(input_ != nullptr, "Linear::backward before forward");
  const std::size_t batch = gradOutput.dim(0);
  DDP_CHECK(gradOutput.dim(1) == out_ && batch == input_->dim(0),
            "Linear::backward shape mismatch");
  const float beta = mode == GradMode::kAccumulate ? 1.0f : 0.0f;
  const int b = static_cast<int>(batch), in = static_cast<int>(in_), out = static_cast<int>(out_);

  // dW = dY^T X : [out, in]
  if (weight_.trainable) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, gradOutput.data(), out,
                input_->data(), in, beta, weight_.grad.data(), in);
  }
  // db = column sums of dY
  if (bias_.trainable) {
    float* db = bias_.grad.data();
    if (mode == GradMode::kOverwrite) bias_.grad.fill(0.0f);
    const float* dy = gradOutput.data();
    for (std::size_t r = 0; r < batch; ++r) {
      for (std::size_t c = 0; c < out_; ++c)
        db[c] += dy[r * out_ + c];
    }
  }
  if (!needInputGrad) return nullptr;
  // dX = dY W : [batch, in]
  gradInput_.resize({batch, in_});
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, gradOutput.data(), out,
              weight_.value.data(), in, 0.0f, gradInput_.data(), in);
  return &gradInput_;
}

}  // namespace ddp::trainer
