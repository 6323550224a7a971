// Gradient clipping's two pieces: the norm's sum of squares (comm/finite.h)
// and PyTorch's clipping factor (trainer/clip.h), on closed-form values.
#include "trainer/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "comm/finite.h"

namespace ddp::trainer {
namespace {

using comm::sumOfSquares;

// Every length around the 8 partial sums, and one far from them.
TEST(SumOfSquares, EqualsTheClosedFormForEveryLength) {
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8},
                                  std::size_t{9}, std::size_t{17}, std::size_t{1000003}}) {
    // Values 1..count: the sum of squares is n(n+1)(2n+1)/6. Each addition
    // rounds by at most 2^-53 of the sum so far.
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = static_cast<float>(i + 1);
    const double n = static_cast<double>(count);
    const double expected = n * (n + 1) * (2 * n + 1) / 6;
    EXPECT_NEAR(sumOfSquares(values.data(), count), expected, expected * 0x1p-53 * n) << count;
  }
}

TEST(SumOfSquares, KeepsTheDigitsAFloatSumLoses) {
  // 2^24 + 1 ones: a float32 running sum stops at 2^24.
  const std::size_t count = (std::size_t{1} << 24) + 1;
  const std::vector<float> ones(count, 1.0f);
  EXPECT_EQ(sumOfSquares(ones.data(), count), static_cast<double>(count));
}

TEST(SumOfSquares, ANaNOrInfinitySpreadsToTheSum) {
  std::vector<float> values(100, 0.5f);
  values[57] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sumOfSquares(values.data(), values.size())));
  values[57] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(sumOfSquares(values.data(), values.size())));
}

TEST(ClipScale, IsPytorchsCoefficientClampedAtOne) {
  // torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6), at most 1.
  EXPECT_FLOAT_EQ(clipScale(4.0f, 1.0f), 1.0f / (4.0f + 1e-6f));
  EXPECT_FLOAT_EQ(clipScale(2.0f, 0.5f), 0.5f / (2.0f + 1e-6f));
  EXPECT_EQ(clipScale(0.5f, 1.0f), 1.0f) << "a norm within the limit is not scaled";
  EXPECT_FLOAT_EQ(clipScale(1.0f, 1.0f), 1.0f / (1.0f + 1e-6f))
      << "a norm at the limit, as PyTorch";
  EXPECT_EQ(clipScale(0.0f, 1.0f), 1.0f) << "a zero gradient";
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(clipScale(1e30f, inf), 1.0f) << "an infinite limit never clips";
  EXPECT_EQ(clipScale(std::numeric_limits<float>::quiet_NaN(), 1.0f), 1.0f)
      << "a NaN norm is the non-finite check's to handle";
}

}  // namespace
}  // namespace ddp::trainer
