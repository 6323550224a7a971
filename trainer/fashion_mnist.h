// Fashion-MNIST (60k train / 10k test, 28x28 grey images, 10 classes) from its
// IDX files, as Debian's dataset-fashion-mnist package installs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainer/dataset.h"

namespace ddp::trainer {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr std::size_t kFashionMnistSide = 28;
inline constexpr std::size_t kFashionMnistFeatures = kFashionMnistSide * kFashionMnistSide;
inline constexpr std::size_t kFashionMnistClasses = 10;

enum class Split { kTrain, kTest };

class ImageDataset final : public Dataset {
 public:
  ImageDataset(std::string name, std::size_t pixels, std::vector<std::uint8_t> images,
               std::vector<std::int32_t> labels, std::size_t classes);
  std::string name() const override { return name_; }
  std::size_t size() const override { return labels_.size(); }
  std::size_t featureDim() const override { return pixels_; }
  std::size_t numClasses() const override { return classes_; }
  // Pixels scaled to [0, 1] as float32(x) / 255.
  void gather(std::span<const std::size_t> indices, float* features,
              std::int32_t* labels) const override;
  std::string fingerprint() const override;

 private:
  std::string name_;
  std::size_t pixels_;
  std::vector<std::uint8_t> images_;
  std::vector<std::int32_t> labels_;
  std::size_t classes_;
};

// Loads `split` from `dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]).
// Checks magic numbers, 28x28 images, equal image and label counts, labels in
// 0..9. Throws DataError naming the file.
std::unique_ptr<Dataset> loadFashionMnist(const std::string& dir, Split split);

// The file `loadFashionMnist` reads for a split ("images" or "labels"): the .gz
// name, or the uncompressed one if only that exists.
std::string fashionMnistPath(const std::string& dir, Split split, const std::string& kind);

}  // namespace ddp::trainer
