// Layer: one step of a model, with forward and backward.
//
// Contract (called by Sequential, on the training thread):
//   forward(input)  -> output. The layer may keep a pointer to `input` for
//                      backward: the caller keeps it alive until then.
//   backward(gradOutput, mode, needInputGrad) -> gradInput, or nullptr when
//                      needInputGrad is false (the first layer: nobody needs
//                      the gradient of the data, and skipping it saves a GEMM).
// Parameter gradients are written into Parameter::grad, overwriting it
// (GradMode::kOverwrite, the first micro-batch of a step) or adding to it
// (kAccumulate, gradient accumulation). Overwriting instead of zeroing first
// saves one pass over every gradient per step.
// Outputs and input gradients live in buffers the layer owns and reuses.
#pragma once

#include <string>
#include <vector>

#include "trainer/tensor.h"

namespace ddp::trainer {

struct Parameter {
  std::string name;  // "layers.0.weight", as PyTorch names it
  Tensor value;
  Tensor grad;  // same shape as value; may be a view into a bucket
  bool trainable = true;
  // Set on a slice of another parameter (a sharded optimizer's part of it:
  // trainer/sharded_optimizer.h): rules that depend on the whole parameter,
  // such as --no-bias-decay's, ask that one.
  const Parameter* sliceOf = nullptr;
};

enum class GradMode { kOverwrite, kAccumulate };

class Layer {
 public:
  virtual ~Layer() = default;
  // "Linear(784, 1024)", for summaries.
  virtual std::string describe() const = 0;
  virtual const Tensor& forward(const Tensor& input) = 0;
  virtual const Tensor* backward(const Tensor& gradOutput, GradMode mode, bool needInputGrad) = 0;
  // This layer's parameters, in registration order ("weight" before "bias").
  virtual std::vector<Parameter*> parameters() { return {}; }
};

}  // namespace ddp::trainer
