#include "trainer/sgd.h"

#include <cstring>

#include "ddp_config.h"
#include "runtime/error.h"
#if DDP_WITH_CUDA
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {

Sgd::Sgd(std::vector<Parameter*> parameters, SgdOptions options)
    : parameters_(std::move(parameters)), options_(options), buffers_(parameters_.size()) {}

std::vector<OptimizerState> Sgd::state() {
  std::vector<OptimizerState> slots;
  if (options_.momentum == 0.0f) return slots;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& param = *parameters_[i];
    if (!param.trainable) continue;
    slots.push_back({"momentum." + param.name, &buffers_[i], param.value.shape(),
                     param.value.device(), &param});
  }
  return slots;
}

void Sgd::step(const StepInputs& inputs) {
  const float lr = options_.lr, mu = options_.momentum;
  const float scale = inputs.gradScale;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& param = *parameters_[i];
    if (!param.trainable) continue;
    const float wd = weightDecayOf(param, options_.weightDecay, options_.decayBiases);
    float* p = param.value.data();
    const float* grad = param.grad.data();
    const std::size_t n = param.value.numel();
    if (param.value.onCuda()) {
#if DDP_WITH_CUDA
      DDP_CHECK(scale == 1.0f, "a host gradient scale for a parameter on a CUDA device");
      Tensor& buffer = buffers_[i];
      // Device tensors start zeroed: with a skip flag, a zero buffer stands
      // in for "first" (trainer/sgd.h).
      const bool first = buffer.empty() && inputs.deviceSkip == nullptr;
      if (buffer.empty() && mu != 0.0f) buffer = Tensor(param.value.shape(), Device::kCuda);
      cuda::sgdUpdate(p, grad, mu != 0.0f ? buffer.data() : nullptr, n, lr, mu, wd,
                      options_.nesterov, first, inputs.deviceSkip, inputs.deviceGradScale);
#endif
      continue;
    }
    DDP_CHECK(inputs.deviceSkip == nullptr && inputs.deviceGradScale == nullptr,
              "device step inputs for a parameter on the CPU");
    if (mu == 0.0f) {
      for (std::size_t j = 0; j < n; ++j)
        p[j] -= lr * (grad[j] * scale + wd * p[j]);
      continue;
    }
    Tensor& buffer = buffers_[i];
    const bool first = buffer.empty();
    if (first) buffer = Tensor(param.value.shape(), param.value.device());
    float* buf = buffer.data();
    for (std::size_t j = 0; j < n; ++j) {
      const float g = grad[j] * scale + wd * p[j];
      buf[j] = first ? g : mu * buf[j] + g;
      p[j] -= lr * (options_.nesterov ? g + mu * buf[j] : buf[j]);
    }
  }
}

}  // namespace ddp::trainer
