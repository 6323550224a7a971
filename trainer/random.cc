#include "trainer/random.h"

#include <cmath>
#include <numbers>
#include <numeric>

namespace ddp::trainer {

float Random::normal() {
  const float u1 = 1.0f - uniform();  // (0, 1]: log stays finite
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * std::numbers::pi_v<float> * u2);
}

std::uint64_t Random::below(std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t x = engine_();
  while (x >= limit)
    x = engine_();
  return x % bound;
}

std::vector<std::size_t> randomPermutation(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Random random(seed);
  for (std::size_t i = n; i > 1; --i)
    std::swap(order[i - 1], order[random.below(i)]);
  return order;
}

}  // namespace ddp::trainer
