#include "trainer/fashion_mnist.h"

#include <filesystem>

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/idx_file.h"

namespace ddp::trainer {
namespace {

constexpr std::size_t kSide = kFashionMnistSide;
constexpr std::size_t kClasses = kFashionMnistClasses;

}  // namespace

ImageDataset::ImageDataset(std::string name, std::size_t pixels, std::vector<std::uint8_t> images,
                           std::vector<std::int32_t> labels, std::size_t classes)
    : name_(std::move(name)),
      pixels_(pixels),
      images_(std::move(images)),
      labels_(std::move(labels)),
      classes_(classes) {}

void ImageDataset::gather(std::span<const std::size_t> indices, float* features,
                          std::int32_t* labels) const {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::uint8_t* image = images_.data() + indices[i] * pixels_;
    float* row = features + i * pixels_;
    for (std::size_t p = 0; p < pixels_; ++p)
      row[p] = static_cast<float>(image[p]) / 255.0f;
    labels[i] = labels_[indices[i]];
  }
}

std::string ImageDataset::fingerprint() const {
  return contentFingerprint(labels_.size(), images_, labels_);
}

std::string fashionMnistPath(const std::string& dir, Split split, const std::string& kind) {
  const std::string stem = split == Split::kTrain ? "train" : "t10k";
  const std::string base =
      kind == "images" ? stem + "-images-idx3-ubyte" : stem + "-labels-idx1-ubyte";
  const std::filesystem::path plain = std::filesystem::path(dir) / base;
  if (!std::filesystem::exists(plain.string() + ".gz") && std::filesystem::exists(plain)) {
    return plain.string();
  }
  return plain.string() + ".gz";
}

std::unique_ptr<Dataset> loadFashionMnist(const std::string& dir, Split split) {
  const std::string imagesPath = fashionMnistPath(dir, split, "images");
  const std::string labelsPath = fashionMnistPath(dir, split, "labels");
  IdxArray images = readIdxFile(imagesPath, 3);
  IdxArray labels = readIdxFile(labelsPath, 1);
  if (images.dims[1] != kSide || images.dims[2] != kSide) {
    throw DataError(
        str(imagesPath, ": images are ", images.dims[1], "x", images.dims[2], ", expected 28x28"));
  }
  if (images.dims[0] == 0) throw DataError(str(imagesPath, ": holds no images"));
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(str(labelsPath, ": has ", labels.dims[0], " labels but ", imagesPath, " has ",
                        images.dims[0], " images"));
  }
  std::vector<std::int32_t> classes(labels.data.size());
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kClasses) {
      throw DataError(str(labelsPath, ": label ", static_cast<int>(labels.data[i]), " at index ", i,
                          " is out of range 0..", kClasses - 1));
    }
    classes[i] = labels.data[i];
  }
  const std::string name = split == Split::kTrain ? "fashion-mnist/train" : "fashion-mnist/test";
  return std::make_unique<ImageDataset>(name, kSide * kSide, std::move(images.data),
                                        std::move(classes), kClasses);
}

}  // namespace ddp::trainer
