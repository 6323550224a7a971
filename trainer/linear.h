// Linear: y = x W^T + b, with W stored [out, in] as PyTorch's nn.Linear.
// GEMMs on OpenBLAS for CPU tensors, on cuBLAS for CUDA tensors (the layer
// runs where its input and parameters are).
#pragma once

#include <cstdint>

#include "trainer/layer.h"

namespace ddp::trainer {

class Linear final : public Layer {
 public:
  // Parameters named "<prefix>weight" and "<prefix>bias", initialised as
  // PyTorch does: U(-1/sqrt(in), 1/sqrt(in)) for both, from `seed`.
  Linear(std::size_t inFeatures, std::size_t outFeatures, const std::string& prefix,
         std::uint64_t seed);

  std::string describe() const override;
  const Tensor& forward(const Tensor& input) override;
  const Tensor* backward(const Tensor& gradOutput, GradMode mode, bool needInputGrad) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }

  std::size_t inFeatures() const { return in_; }
  std::size_t outFeatures() const { return out_; }

 private:
  std::size_t in_;
  std::size_t out_;
  Parameter weight_;
  Parameter bias_;
  const Tensor* input_ = nullptr;
  Tensor output_;
  Tensor gradInput_;
  Tensor ones_;  // CUDA: the bias gradient is dY^T x ones (a cuBLAS GEMV)
};

}  // namespace ddp::trainer
