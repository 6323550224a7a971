#include "trainer/relu.h"

#include "ddp_config.h"
#include "runtime/error.h"
#if DDP_WITH_CUDA
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {

const Tensor& Relu::forward(const Tensor& input) {
  output_.resize(input.shape(), input.device());
#if DDP_WITH_CUDA
  if (input.onCuda()) {
    cuda::reluForward(input.data(), output_.data(), input.numel());
    return output_;
  }
#endif
  const float* x = input.data();
  float* y = output_.data();
  for (std::size_t i = 0, n = input.numel(); i < n; ++i)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return output_;
}

const Tensor* Relu::backward(const Tensor& gradOutput, GradMode, bool needInputGrad) {
  if (!needInputGrad) return nullptr;
  DDP_CHECK(gradOutput.shape() == output_.shape(), "ReLU::backward shape mismatch");
  gradInput_.resize(gradOutput.shape(), gradOutput.device());
#if DDP_WITH_CUDA
  if (gradOutput.onCuda()) {
    cuda::reluBackward(output_.data(), gradOutput.data(), gradInput_.data(), gradOutput.numel());
    return &gradInput_;
  }
#endif
  const float* y = output_.data();
  const float* dy = gradOutput.data();
  float* dx = gradInput_.data();
  for (std::size_t i = 0, n = gradOutput.numel(); i < n; ++i)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  return &gradInput_;
}

}  // namespace ddp::trainer
