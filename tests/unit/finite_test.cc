// comm/finite.h's checks: anyNonFinite finds one NaN or infinity wherever
// it lies (either side of its 4096-element blocks) and nothing in finite
// extremes; sumOfSquares gives, bit for bit, the order its header promises
// (eight lanes by index, the tail, then the lanes), which is what makes every
// rank's clipping norm the same bits.
#include "comm/finite.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ddp::comm {
namespace {

template <class T>
void findsEachSpecialAnywhere() {
  using Limits = std::numeric_limits<T>;
  const T finite[] = {
      T{0}, -T{0}, Limits::max(), Limits::lowest(), Limits::min(), Limits::denorm_min(), T{1}};
  const T specials[] = {Limits::quiet_NaN(), -Limits::quiet_NaN(), Limits::infinity(),
                        -Limits::infinity()};
  // Lengths around the vector widths, and positions around the 4096-element blocks.
  for (const std::size_t count : {1u, 2u, 3u, 7u, 8u, 9u, 31u, 33u, 4095u, 4096u, 4097u, 10000u}) {
    std::vector<T> values(count);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = finite[i % std::size(finite)];
    EXPECT_FALSE(anyNonFinite(values.data(), count)) << count;
    for (const std::size_t at :
         {std::size_t{0}, count / 2, count - 1, std::size_t{4095}, std::size_t{4096}}) {
      if (at >= count) continue;
      for (const T special : specials) {
        const T kept = values[at];
        values[at] = special;
        EXPECT_TRUE(anyNonFinite(values.data(), count)) << count << " at " << at;
        values[at] = kept;
      }
    }
  }
  EXPECT_FALSE(anyNonFinite(static_cast<const T*>(nullptr), 0));
}

TEST(AnyNonFinite, FindsANaNOrInfinityAnywhereAndNothingElseFloat) {
  findsEachSpecialAnywhere<float>();
}

TEST(AnyNonFinite, FindsANaNOrInfinityAnywhereAndNothingElseDouble) {
  findsEachSpecialAnywhere<double>();
}

double inPromisedOrder(const std::vector<float>& values) {
  const std::size_t whole = values.size() / 8 * 8;
  double lanes[8] = {};
  for (std::size_t i = 0; i < whole; ++i)
    lanes[i % 8] += static_cast<double>(values[i]) * static_cast<double>(values[i]);
  double total = 0.0;
  for (std::size_t i = whole; i < values.size(); ++i)
    total += static_cast<double>(values[i]) * static_cast<double>(values[i]);
  for (const double lane : lanes)
    total += lane;
  return total;
}

TEST(SumOfSquares, GivesThePromisedOrdersBitsOnEveryLength) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t count = 0; count <= 100003; count = count < 100 ? count + 1 : count * 3 + 1) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = normal(random) * std::ldexp(1.0f, static_cast<int>(i % 60) - 30);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(sumOfSquares(values.data(), count)),
              std::bit_cast<std::uint64_t>(inPromisedOrder(values)))
        << count << " values";
  }
}

}  // namespace
}  // namespace ddp::comm
