// Dataset: a fixed list of (features, label) samples, identical on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddp {
class ParallelFor;
}

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
  // What identifies the samples' content ("60000 samples, crc32 3f1a..."):
  // ddp_train compares it across ranks at start-up, because a node whose
  // copy of the files differs would otherwise train on other samples without
  // a word. Reads every byte: about 10 ms for both Fashion-MNIST sets (55 MB;
  // benchmarks/fingerprint_bench, RESULTS.md).
  virtual std::string fingerprint() const = 0;
};

// dataset.gather(indices, features, labels), its rows split between the
// threads of `threads` in parts of at least kGatherFloatsPerPart floats
// (Note [Threads kept for the batch gather] in runtime/parallel_for.h).
// Writes the same bytes as one call.
inline constexpr std::size_t kGatherFloatsPerPart = std::size_t{1} << 18;
void gatherInParallel(const Dataset& dataset, std::span<const std::size_t> indices, float* features,
                      std::int32_t* labels, ParallelFor& threads);

// The fingerprint of `samples` samples stored as these bytes and labels.
std::string contentFingerprint(std::size_t samples, std::span<const std::uint8_t> features,
                               std::span<const std::int32_t> labels);

}  // namespace ddp::trainer
