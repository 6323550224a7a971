// Model profiles: the parameter tensors of well-known models, in the order
// PyTorch registers them (model.named_parameters()), so ddp_bench can run the
// real Reducer on their gradients without the models themselves.
//
//   resnet50    torchvision's ResNet-50: 161 tensors, 25,557,032 parameters
//   bert-base   Hugging Face BertModel (bert-base-uncased, with the pooler):
//               199 tensors, 109,482,240 parameters
//   gpt2        GPT-2 124M (the LM head tied to the token embedding):
//               148 tensors, 124,439,808 parameters
//   mlp         ddp_train's default MLP (784-1024-1024-10): 6 tensors,
//               1,863,690 parameters
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddp::bench {

struct Tensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::size_t numel() const;
};

// One "layer" of backward: the tensors one module finishes together (a conv
// and its batch norm, a linear's weight and bias), in registration order.
struct Layer {
  std::string name;
  std::vector<Tensor> tensors;
  std::size_t numel() const;
};

struct Profile {
  std::string name;
  std::vector<Layer> layers;  // registration (forward) order
  std::size_t tensorCount() const;
  std::size_t parameterCount() const;
};

// The profile called `name` (one of profileNames()). Throws UsageError.
Profile makeProfile(const std::string& name);
std::vector<std::string> profileNames();

}  // namespace ddp::bench
