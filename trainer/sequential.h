// Sequential: layers applied in order; the model type ddp_train builds.
//
// Parameters are named as PyTorch names the children of an nn.Sequential held
// in an attribute `layers`: "layers.<index>.weight". So the weights we save load
// into the equivalent PyTorch module, and theirs into ours.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "trainer/layer.h"

namespace ddp::trainer {

class Sequential {
 public:
  // Appends a layer; its index is the position in the list (ReLUs count too).
  void add(std::unique_ptr<Layer> layer);
  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t index) { return *layers_.at(index); }

  const Tensor& forward(const Tensor& input);
  // Called right after layer `index`'s backward, when its parameter gradients
  // are final for this pass: the moment their all-reduce may start.
  using LayerDone = std::function<void(std::size_t index, Layer& layer)>;

  // Runs every layer's backward, last to first. The data's gradient is not
  // computed (the first layer gets needInputGrad = false).
  void backward(const Tensor& gradOutput, GradMode mode, const LayerDone& onLayerDone = {});

  // Every parameter in registration order: layer by layer, weight before bias.
  std::vector<Parameter*> parameters();
  std::size_t parameterCount();
  // Moves every parameter (value and gradient) to `device`; those already
  // there keep their memory. Activations follow the input on the next forward.
  void to(Device device);
  // Where the parameters are (kCpu for a model without parameters).
  Device device();
  std::string describe() const;  // "Linear(784, 1024) -> ReLU() -> ..."

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace ddp::trainer
