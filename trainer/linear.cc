#include "trainer/linear.h"

#include <cblas.h>

#include <cmath>

#include "ddp_config.h"
#include "runtime/error.h"
#include "runtime/heartbeat.h"
#include "trainer/random.h"
#if DDP_WITH_CUDA
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublas_library.h"
#include "runtime/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {

#if DDP_WITH_CUDA
namespace {

// cuBLAS is column-major; a row-major matrix M[r, c] is the column-major
// M^T[c, r]. So the row-major products below are computed as their
// transposes: Y = X W^T is Y^T = W X^T, and so on.
void forwardCuda(const Tensor& input, const Tensor& weight, const Tensor& bias, Tensor& output) {
  const std::size_t batch = input.dim(0), out = weight.dim(0);
  const int b = static_cast<int>(batch), in = static_cast<int>(weight.dim(1)),
            o = static_cast<int>(out);
  cuda::broadcastRows(bias.data(), output.data(), batch, out);
  const float one = 1.0f;
  // Y^T[out, b] = W[out, in] (stored as W^T col-major: transpose it) x X^T[in, b]
  DDP_CUBLAS_CHECK(ddp::cuda::cublas().sgemm(ddp::cuda::blasHandle(), CUBLAS_OP_T, CUBLAS_OP_N, o,
                                             b, in, &one, weight.data(), in, input.data(), in, &one,
                                             output.data(), o));
}

// dW, db (when trainable; beta 0 overwrites, 1 accumulates) and, when
// `gradInput` is given, dX.
void backwardCuda(const Tensor& input, const Tensor& gradOutput, Parameter& weight, Parameter& bias,
                  float beta, Tensor& ones, Tensor* gradInput) {
  const std::size_t batch = gradOutput.dim(0);
  const int b = static_cast<int>(batch), in = static_cast<int>(weight.value.dim(1)),
            out = static_cast<int>(weight.value.dim(0));
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t blas = ddp::cuda::blasHandle();
  const ddp::cuda::CublasLibrary& library = ddp::cuda::cublas();
  if (weight.trainable) {
    // dW^T[in, out] = X^T[in, b] x dY[b, out] (dY stored as dY^T col-major: transpose it)
    DDP_CUBLAS_CHECK(library.sgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, b, &one, input.data(),
                                   in, gradOutput.data(), out, &beta, weight.grad.data(), in));
  }
  if (bias.trainable) {
    if (ones.numel() != batch) {
      ones = Tensor({batch}, Device::kCuda);
      ones.fill(1.0f);
    }
    // db[out] = dY^T[out, b] x ones[b]
    DDP_CUBLAS_CHECK(library.sgemv(blas, CUBLAS_OP_N, out, b, &one, gradOutput.data(), out,
                                   ones.data(), 1, &beta, bias.grad.data(), 1));
  }
  if (gradInput == nullptr) return;
  // dX^T[in, b] = W^T[in, out] x dY^T[out, b]
  DDP_CUBLAS_CHECK(library.sgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, in, b, out, &one,
                                 weight.value.data(), in, gradOutput.data(), out, &zero,
                                 gradInput->data(), in));
}

}  // namespace
#endif

Linear::Linear(std::size_t inFeatures, std::size_t outFeatures, const std::string& prefix,
               std::uint64_t seed)
    : in_(inFeatures), out_(outFeatures) {
  weight_ = Parameter{prefix + "weight", Tensor({out_, in_}), Tensor({out_, in_}), true};
  bias_ = Parameter{prefix + "bias", Tensor({out_}), Tensor({out_}), true};
  Random random(seed);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  std::size_t drawn = 0;
  for (float& w : weight_.value.span()) {
    w = random.uniform(-bound, bound);
    if (++drawn % (std::size_t{1} << 22) == 0) heartbeat();  // Note [Heartbeats of local work]
  }
  for (float& b : bias_.value.span())
    b = random.uniform(-bound, bound);
}

std::string Linear::describe() const {
  return str("Linear(", in_, ", ", out_, ")");
}

const Tensor& Linear::forward(const Tensor& input) {
  DDP_CHECK(input.shape().size() == 2 && input.dim(1) == in_,
            str(describe(), " got input ", shapeString(input.shape())));
  DDP_CHECK(input.device() == weight_.value.device(),
            str(describe(), ": input on ", deviceName(input.device()), ", weights on ",
                deviceName(weight_.value.device())));
  const std::size_t batch = input.dim(0);
  input_ = &input;
  output_.resize({batch, out_}, input.device());
#if DDP_WITH_CUDA
  if (input.onCuda()) {
    forwardCuda(input, weight_.value, bias_.value, output_);
    return output_;
  }
#endif
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
#if DDP_WITH_CUDA
  if (gradOutput.onCuda()) {
    if (needInputGrad) gradInput_.resize({batch, in_}, Device::kCuda);
    backwardCuda(*input_, gradOutput, weight_, bias_, beta, ones_,
                 needInputGrad ? &gradInput_ : nullptr);
    return needInputGrad ? &gradInput_ : nullptr;
  }
#endif

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
