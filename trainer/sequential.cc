#include "trainer/sequential.h"

#include "runtime/error.h"

namespace ddp::trainer {

void Sequential::add(std::unique_ptr<Layer> layer) {
  layers_.push_back(std::move(layer));
}

const Tensor& Sequential::forward(const Tensor& input) {
  DDP_CHECK(!layers_.empty(), "forward through an empty model");
  const Tensor* x = &input;
  for (auto& layer : layers_)
    x = &layer->forward(*x);
  return *x;
}

void Sequential::backward(const Tensor& gradOutput, GradMode mode, const LayerDone& onLayerDone) {
  const Tensor* grad = &gradOutput;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    grad = layers_[i]->backward(*grad, mode, /*needInputGrad=*/i > 0);
    if (onLayerDone) onLayerDone(i, *layers_[i]);
  }
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (auto& layer : layers_) {
    for (Parameter* p : layer->parameters())
      all.push_back(p);
  }
  return all;
}

std::size_t Sequential::parameterCount() {
  std::size_t n = 0;
  for (Parameter* p : parameters())
    n += p->value.numel();
  return n;
}

void Sequential::to(Device device) {
  // Tensor::to copies: a tensor already on `device` stays as it is, so a CPU
  // run does not allocate, zero and copy its whole model once more.
  for (Parameter* p : parameters()) {
    if (p->value.device() != device) p->value = p->value.to(device);
    if (p->grad.device() != device) p->grad = p->grad.to(device);
  }
}

Device Sequential::device() {
  const std::vector<Parameter*> all = parameters();
  return all.empty() ? Device::kCpu : all.front()->value.device();
}

std::string Sequential::describe() const {
  std::vector<std::string> parts;
  for (const auto& layer : layers_)
    parts.push_back(layer->describe());
  return join(parts, " -> ");
}

}  // namespace ddp::trainer
