#include "trainer/clip.h"

namespace ddp::trainer {

double sumOfSquares(const float* values, std::size_t count) {
  // Independent partial sums, so that the additions overlap instead of each
  // waiting for the last (one chain is bound by the adder's latency: ~4x
  // slower). Still one fixed order for given values.
  constexpr std::size_t kLanes = 8;
  double lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (std::size_t k = 0; k < kLanes; ++k) {
      const double v = values[i + k];
      lanes[k] += v * v;
    }
  }
  double total = 0.0;
  for (; i < count; ++i) {
    const double v = values[i];
    total += v * v;
  }
  for (const double lane : lanes)
    total += lane;
  return total;
}

}  // namespace ddp::trainer
