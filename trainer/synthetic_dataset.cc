#include "trainer/synthetic_dataset.h"

#include <algorithm>

#include "runtime/heartbeat.h"
#include "runtime/str.h"
#include "trainer/random.h"

namespace ddp::trainer {
namespace {

constexpr float kNoise = 1.0f;         // per-feature standard deviation inside a cluster
constexpr float kCentreScale = 0.15f;  // spread of the class centres

}  // namespace

SyntheticDataset::SyntheticDataset(std::size_t samples, std::size_t featureDim, std::size_t classes,
                                   std::uint64_t seed, int split)
    : featureDim_(featureDim), classes_(classes), split_(split) {
  Random centres(seed);
  std::vector<float> centre(classes * featureDim);
  for (float& c : centre)
    c = kCentreScale * centres.normal();
  Random random(seed * 1000003u + 7919u * static_cast<std::uint64_t>(split + 1));
  // Reserved, not resized: resizing zeroed every feature first, one pass
  // over the whole set without a heartbeat (600,000 samples: over 3 s here,
  // taken for a hang under --timeout 1).
  features_.reserve(samples * featureDim);
  labels_.reserve(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    if (i % 4096 == 0) heartbeat();  // Note [Heartbeats of local work]
    const auto label = static_cast<std::int32_t>(random.below(classes));
    labels_.push_back(label);
    const float* c = centre.data() + static_cast<std::size_t>(label) * featureDim;
    for (std::size_t f = 0; f < featureDim; ++f)
      features_.push_back(c[f] + kNoise * random.normal());
  }
}

std::string SyntheticDataset::name() const {
  return str("synthetic/", split_ == 0 ? "train" : "test");
}

void SyntheticDataset::gather(std::span<const std::size_t> indices, float* features,
                              std::int32_t* labels) const {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const float* row = features_.data() + indices[i] * featureDim_;
    std::copy(row, row + featureDim_, features + i * featureDim_);
    labels[i] = labels_[indices[i]];
  }
}

// The features as generated, so two builds whose generators differ disagree.
std::string SyntheticDataset::fingerprint() const {
  return contentFingerprint(
      labels_.size(),
      {reinterpret_cast<const std::uint8_t*>(features_.data()), features_.size() * sizeof(float)},
      labels_);
}

}  // namespace ddp::trainer
