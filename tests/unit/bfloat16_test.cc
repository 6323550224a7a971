#include "comm/bfloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

}  // namespace
}  // namespace ddp::comm
