// Dataset: a fixed list of (features, label) samples, identical on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ddp::trainer {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual std::size_t size() const = 0;
  virtual std::size_t featureDim() const = 0;
  virtual std::size_t numClasses() const = 0;
  // Writes the samples `indices` as rows of `features` (indices.size() x
  // featureDim floats) and their labels. Thread-compatible (const).
  virtual void gather(std::span<const std::size_t> indices, float* features,
                      std::int32_t* labels) const = 0;
};

}  // namespace ddp::trainer
