#include "trainer/adamw.h"

#include <cmath>

#include "ddp_config.h"
#include "runtime/error.h"
#if DDP_WITH_CUDA
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {

AdamW::AdamW(std::vector<Parameter*> parameters, AdamWOptions options)
    : parameters_(std::move(parameters)),
      options_(options),
      expAvg_(parameters_.size()),
      expAvgSq_(parameters_.size()) {}

std::vector<OptimizerState> AdamW::state() {
  std::vector<OptimizerState> slots;
  Device device = Device::kCpu;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& param = *parameters_[i];
    if (!param.trainable) continue;
    device = param.value.device();
    slots.push_back({"exp_avg." + param.name, &expAvg_[i], param.value.shape(), device, &param});
    slots.push_back(
        {"exp_avg_sq." + param.name, &expAvgSq_[i], param.value.shape(), device, &param});
  }
  slots.push_back({"step", &step_, {1}, device});
  return slots;
}

void AdamW::createState() {
  for (const OptimizerState& slot : state())
    *slot.tensor = Tensor(slot.shape, slot.device);
}

void AdamW::step(const StepInputs& inputs) {
  if (step_.empty()) createState();  // all of it exists or none (a restore fills all)
  if (step_.onCuda()) {
    stepOnDevice(inputs);
    return;
  }
  DDP_CHECK(inputs.deviceSkip == nullptr && inputs.deviceGradScale == nullptr,
            "device step inputs for parameters on the CPU");
  stepOnHost(inputs.gradScale);
}

float AdamW::decayFactor(const Parameter& param) const {
  const float wd = weightDecayOf(param, options_.weightDecay, options_.decayBiases);
  return static_cast<float>(1.0 - static_cast<double>(options_.lr) * wd);  // as PyTorch: in double
}

void AdamW::stepOnHost(float gradScale) {
  const AdamWOptions& o = options_;
  float& t = step_.data()[0];
  t += 1.0f;
  const double correction1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(t));
  const double correction2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(t));
  const float stepSize = static_cast<float>(o.lr / correction1);
  const float correction2Sqrt = static_cast<float>(std::sqrt(correction2));
  const float keep1 = o.beta1, take1 = static_cast<float>(1.0 - o.beta1);
  const float keep2 = o.beta2, take2 = static_cast<float>(1.0 - o.beta2);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& param = *parameters_[i];
    if (!param.trainable) continue;
    float* p = param.value.data();
    const float* grad = param.grad.data();
    float* m = expAvg_[i].data();
    float* v = expAvgSq_[i].data();
    const float decay = decayFactor(param);
    const std::size_t n = param.value.numel();
    for (std::size_t j = 0; j < n; ++j) {
      const float g = grad[j] * gradScale;
      p[j] *= decay;
      m[j] = m[j] * keep1 + g * take1;
      v[j] = v[j] * keep2 + take2 * g * g;
      const float denom = std::sqrt(v[j]) / correction2Sqrt + o.eps;
      p[j] += -stepSize * m[j] / denom;
    }
  }
}

void AdamW::stepOnDevice([[maybe_unused]] const StepInputs& inputs) {
#if DDP_WITH_CUDA
  DDP_CHECK(inputs.gradScale == 1.0f, "a host gradient scale for parameters on a CUDA device");
  const AdamWOptions& o = options_;
  if (deviceFactors_.empty()) deviceFactors_ = Tensor({2}, Device::kCuda);
  cuda::adamwBeginStep(step_.data(), deviceFactors_.data(), o.lr, o.beta1, o.beta2,
                       inputs.deviceSkip);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& param = *parameters_[i];
    if (!param.trainable) continue;
    cuda::adamwUpdate(param.value.data(), param.grad.data(), expAvg_[i].data(), expAvgSq_[i].data(),
                      param.value.numel(), decayFactor(param), o.beta1, o.beta2, o.eps,
                      deviceFactors_.data(), inputs.deviceSkip, inputs.deviceGradScale);
  }
#else
  DDP_CHECK(false, "AdamW state on a CUDA device in a build without CUDA");
#endif
}

}  // namespace ddp::trainer
