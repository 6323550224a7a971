// The number formats of every log line (runtime/str.h).
#include "runtime/str.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace ddp {
namespace {

TEST(Str, FixedAndSignificantDigits) {
  EXPECT_EQ(fixed(3.14159, 2), "3.14");
  EXPECT_EQ(fixed(-0.5, 0), "-0");  // printf's rounding, to even
  volatile double big = 1e300;      // not folded: g++ would warn of the first try's truncation
  EXPECT_EQ(fixed(big, 1).size(), 303u);  // every digit, past the buffer
  EXPECT_EQ(significant(0.04972, 3), "0.0497");
  EXPECT_EQ(significant(0.1, 3), "0.1");
  EXPECT_EQ(std::stod(significant(0.1, kExactDigits)), 0.1);
}

// A loss gone to NaN reads "nan", not "-nan": a NaN's sign bit (0 * inf
// sets it) means nothing.
TEST(Str, NotANumberHasNoSignAndInfinitiesKeepTheirs) {
  const double inf = std::numeric_limits<double>::infinity();
  const double negativeNan = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
  ASSERT_TRUE(std::signbit(negativeNan));
  for (const double nan : {negativeNan, std::numeric_limits<double>::quiet_NaN(), 0 * inf}) {
    EXPECT_EQ(fixed(nan, 4), "nan");
    EXPECT_EQ(significant(nan, 3), "nan");
  }
  EXPECT_EQ(fixed(inf, 2), "inf");
  EXPECT_EQ(fixed(-inf, 2), "-inf");
  EXPECT_EQ(significant(-inf, 3), "-inf");
}

// A loss that diverged stays readable; any other keeps its fixed digits.
TEST(Str, LargeValuesTakeAnExponent) {
  EXPECT_EQ(fixedOrExponent(0.51234567, 4), "0.5123");
  EXPECT_EQ(fixedOrExponent(999999.0, 4), "999999.0000");
  EXPECT_EQ(fixedOrExponent(5413027987803656060665856.0, 4), "5.4130e+24");
  EXPECT_EQ(fixedOrExponent(-2.5e7, 2), "-2.50e+07");
  EXPECT_EQ(fixedOrExponent(std::numeric_limits<double>::infinity(), 4), "inf");
  EXPECT_EQ(fixedOrExponent(std::numeric_limits<double>::quiet_NaN(), 4), "nan");
}

}  // namespace
}  // namespace ddp
