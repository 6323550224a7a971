// comm/mpi/stripes.h: the plain reduce-scatter's calls (Note [Plain
// reduce-scatter in stripes]) cover every part exactly once, in order, with
// no call over a piece and its rounding, and give every rank a share of
// every call when its part is long enough: a call where some rank's stripe
// is empty is the slow case the stripes exist to avoid.
#include "comm/mpi/stripes.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ddp::comm {
namespace {

TEST(Stripes, CutEachPartIntoItsShareOfEveryPiece) {
  const std::vector<std::size_t> parts = {0, 10, 30, 60};
  const Stripes stripes(parts, 16);
  ASSERT_EQ(stripes.count(), 4u);  // 60 elements need four pieces of 16
  const std::vector<std::vector<std::size_t>> begins = {
      {0, 2, 5, 7, 10},       // 10 elements: 2.5 a stripe, rounded down
      {10, 15, 20, 25, 30},   // 20: 5 each
      {30, 37, 45, 52, 60}};  // 30: 7.5 each
  for (std::size_t q = 0; q < 3; ++q) {
    for (std::size_t j = 0; j <= 4; ++j)
      EXPECT_EQ(stripes.begin(q, j), begins[q][j]) << "part " << q << ", stripe " << j;
  }
  EXPECT_EQ(stripes.length(0, 0), 2u);
  EXPECT_EQ(stripes.length(2, 3), 8u);
}

TEST(Stripes, WithinOnePieceAreThePartsThemselves) {
  const std::vector<std::size_t> parts = {0, 3, 3, 16};  // an empty part too
  const Stripes stripes(parts, 16);
  ASSERT_EQ(stripes.count(), 1u);
  for (std::size_t q = 0; q < 3; ++q) {
    EXPECT_EQ(stripes.begin(q, 0), parts[q]);
    EXPECT_EQ(stripes.begin(q, 1), parts[q + 1]);
  }
}

TEST(Stripes, OfNothingIsOneEmptyCall) {
  const std::vector<std::size_t> parts = {0, 0, 0};
  const Stripes stripes(parts, 8);
  ASSERT_EQ(stripes.count(), 1u);
  EXPECT_EQ(stripes.length(0, 0) + stripes.length(1, 0), 0u);
}

TEST(Stripes, CoverEveryPartOnceAndKeepEachCallNearAPiece) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t ranks = 1 + random() % 9;
    const std::size_t piece = 1 + random() % 5000;
    std::vector<std::size_t> parts = {0};
    for (std::size_t q = 0; q < ranks; ++q)
      parts.push_back(parts.back() + (random() % 4 == 0 ? 0 : random() % 20000));
    const Stripes stripes(parts, piece);
    const std::size_t count = parts.back();
    ASSERT_EQ(stripes.count(), count == 0 ? 1 : (count + piece - 1) / piece);
    for (std::size_t j = 0; j < stripes.count(); ++j) {
      std::size_t call = 0;
      for (std::size_t q = 0; q < ranks; ++q) {
        ASSERT_LE(stripes.begin(q, j), stripes.begin(q, j + 1));
        call += stripes.length(q, j);
        // A part at least as long as the stripes are many is in every call.
        if (parts[q + 1] - parts[q] >= stripes.count()) {
          ASSERT_GT(stripes.length(q, j), 0u);
        }
      }
      ASSERT_LE(call, piece + ranks) << "trial " << trial << ", stripe " << j;
    }
    for (std::size_t q = 0; q < ranks; ++q) {
      ASSERT_EQ(stripes.begin(q, 0), parts[q]);
      ASSERT_EQ(stripes.begin(q, stripes.count()), parts[q + 1]);
    }
  }
}

}  // namespace
}  // namespace ddp::comm
