// A seeded synthetic classification dataset: one Gaussian cluster per class.
//
// Learnable (clusters are separated), deterministic (same seed, same bytes on
// every rank and run) and needs no files: for tests, benchmarks and trying the
// runtime on a machine without Fashion-MNIST.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/dataset.h"

namespace ddp::trainer {

class SyntheticDataset final : public Dataset {
 public:
  // `split` 0 = train, 1 = test: same class centres, different samples.
  SyntheticDataset(std::size_t samples, std::size_t featureDim, std::size_t classes,
                   std::uint64_t seed, int split);
  std::string name() const override;
  std::size_t size() const override { return labels_.size(); }
  std::size_t featureDim() const override { return featureDim_; }
  std::size_t numClasses() const override { return classes_; }
  void gather(std::span<const std::size_t> indices, float* features,
              std::int32_t* labels) const override;
  std::string fingerprint() const override;

 private:
  std::size_t featureDim_;
  std::size_t classes_;
  int split_;
  std::vector<float> features_;
  std::vector<std::int32_t> labels_;
};

}  // namespace ddp::trainer
