// Seeded random numbers that are identical on every rank and every platform.
//
// std::uniform_real_distribution and friends are not specified bit-for-bit by
// the standard; these are, so a seed means the same model and the same
// permutation everywhere (required: every rank must draw the same sampler
// permutation, and np=1 must equal np=N).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ddp::trainer {

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1), 24 random bits.
  float uniform() { return static_cast<float>(engine_() >> 40) * 0x1.0p-24f; }
  float uniform(float low, float high) { return low + (high - low) * uniform(); }
  // Standard normal (Box-Muller on the uniforms above).
  float normal();
  // Uniform integer in [0, bound), unbiased (rejection sampling).
  std::uint64_t below(std::uint64_t bound);
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// A permutation of 0..n-1 (Fisher-Yates driven by Random::below).
std::vector<std::size_t> randomPermutation(std::size_t n, std::uint64_t seed);

}  // namespace ddp::trainer
