#include "comm/bfloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace ddp::comm {
namespace {

TEST(BFloat16, ValuesWithEightSignificantBitsAreExact) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 256.0f, 0.15625f, 3.0e38f, 1.0e-38f}) {
    const float back = fromBFloat16(toBFloat16(v));
    if (std::abs(v) == 3.0e38f || std::abs(v) == 1.0e-38f) {
      EXPECT_NEAR(back, v, std::abs(v) * 0x1.0p-8f);
    } else {
      EXPECT_EQ(back, v);
    }
  }
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(fromBFloat16(toBFloat16(1.0f + 0x1.0p-8f)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(fromBFloat16(toBFloat16(1.0f + 3 * 0x1.0p-8f)), 1.0f + 0x1.0p-6f);
  // Just above halfway rounds up.
  EXPECT_EQ(fromBFloat16(toBFloat16(1.0f + 0x1.0p-8f + 0x1.0p-20f)), 1.0f + 0x1.0p-7f);
}

TEST(BFloat16, RelativeErrorIsAtMostTwoToTheMinusEight) {
  for (float v = 1e-3f; v < 1e3f; v *= 1.0173f) {
    EXPECT_LE(std::abs(fromBFloat16(toBFloat16(v)) - v), v * 0x1.0p-8f) << v;
  }
}

TEST(BFloat16, InfinityAndNanSurvive) {
  EXPECT_TRUE(std::isinf(fromBFloat16(toBFloat16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(fromBFloat16(toBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

// roundedToBFloat16 (the shared-memory reduction's rounding: Note [bf16
// rounding inside the reduction]) must give the round trip's bits: on every
// high half with the low halves where rounding decides (zero, just below,
// at and above the tie, all ones), which covers every sign, exponent,
// infinity and NaN payload class, and on a stride through all 2^32 patterns.
TEST(BFloat16, RoundedInPlaceIsTheRoundTripBitForBit) {
  const auto check = [](std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, 4);
    const float expected = fromBFloat16(toBFloat16(value));
    const float rounded = roundedToBFloat16(value);
    std::uint32_t got, want;
    std::memcpy(&got, &rounded, 4);
    std::memcpy(&want, &expected, 4);
    return got == want;
  };
  std::uint64_t wrong = 0, first = 0;
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const std::uint32_t bits = high << 16 | low;
      if (!check(bits) && wrong++ == 0) first = bits;
    }
  }
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 251) {
    if (!check(static_cast<std::uint32_t>(bits)) && wrong++ == 0) first = bits;
  }
  EXPECT_EQ(wrong, 0u) << "first wrong pattern 0x" << std::hex << first;
}

// The loops over arrays (comm/bfloat16.cc, compiled for AVX2 as well, which
// a machine with AVX2 runs here) give the scalar conversions' bits: every
// high half with the low halves where rounding decides, NaNs and infinities
// among them, narrowed, widened, and added to a second pattern.
TEST(BFloat16, ArrayLoopsGiveTheScalarBits) {
  std::vector<float> values;
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (std::uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const std::uint32_t bits = high << 16 | low;
      float value;
      std::memcpy(&value, &bits, 4);
      values.push_back(value);
    }
  }
  const std::size_t count = values.size();
  std::vector<std::uint16_t> narrowed(count), sums(count);
  std::vector<float> widened(count);
  toBFloat16(values.data(), narrowed.data(), count);
  fromBFloat16(narrowed.data(), widened.data(), count);
  for (std::size_t i = 0; i < count; ++i)
    sums[i] = narrowed[(i * 7919) % count];
  addBFloat16(narrowed.data(), sums.data(), count);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t expected = toBFloat16(values[i]);
    const float back = fromBFloat16(expected);
    const float a = fromBFloat16(expected), b = fromBFloat16(narrowed[(i * 7919) % count]);
    const std::uint16_t sum = toBFloat16(a + b);
    // Of two NaNs, which one's payload a sum keeps is the compiler's choice
    // (it may swap the operands): any NaN will do.
    const bool sumRight =
        std::isnan(a) && std::isnan(b) ? std::isnan(fromBFloat16(sums[i])) : sums[i] == sum;
    const bool bad =
        narrowed[i] != expected || std::memcmp(&widened[i], &back, 4) != 0 || !sumRight;
    if (bad && wrong++ < 5) {
      ADD_FAILURE() << std::hex << "pattern " << i << ": narrowed " << narrowed[i] << " against "
                    << expected << ", sum " << sums[i] << " against " << sum << " (of "
                    << narrowed[i] << " and " << narrowed[(i * 7919) % count] << ")";
    }
  }
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace ddp::comm
