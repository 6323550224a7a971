// The Reducer's bucket layout: reverse registration order, a small first
// bucket, caps, one bucket per gradient for cap 0, one bucket for a huge cap,
// frozen gradients left out.
#include <gtest/gtest.h>

#include "comm/reducer.h"

namespace ddp::comm {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// The default MLP's gradients: layers.0 (1024x784 + 1024), layers.2 (1024x1024 + 1024), layers.4
// (10x1024 + 10).
std::vector<GradientSpec> mlp() {
  return {{"layers.0.weight", 1024 * 784},  {"layers.0.bias", 1024},
          {"layers.2.weight", 1024 * 1024}, {"layers.2.bias", 1024},
          {"layers.4.weight", 10240},       {"layers.4.bias", 10}};
}

std::vector<std::vector<std::size_t>> members(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<std::size_t>> out;
  for (const Bucket& b : buckets)
    out.push_back(b.gradients);
  return out;
}

TEST(BucketLayout, ReverseOrderFirstBucketClosesAtOneMiB) {
  const auto buckets = computeBucketLayout(mlp(), kMiB, 25 * kMiB);
  // 5, 4, 3 are tiny; adding 2 (4 MiB) passes 1 MiB and closes the first bucket.
  EXPECT_EQ(members(buckets), (std::vector<std::vector<std::size_t>>{{5, 4, 3, 2}, {1, 0}}));
  EXPECT_EQ(buckets[0].offset, 0u);
  EXPECT_EQ(buckets[0].count, 10u + 10240 + 1024 + 1024 * 1024);
  EXPECT_EQ(buckets[1].offset, buckets[0].count);
  EXPECT_EQ(buckets[1].count, 1024u + 1024 * 784);
}

TEST(BucketLayout, CapZeroGivesEveryGradientItsOwnBucket) {
  const auto buckets = computeBucketLayout(mlp(), 0, 0);
  EXPECT_EQ(members(buckets),
            (std::vector<std::vector<std::size_t>>{{5}, {4}, {3}, {2}, {1}, {0}}));
}

TEST(BucketLayout, AFiniteCapAboveTheModelKeepsTheSmallFirstBucket) {
  // As in PyTorch: the first bucket stays small so that communication starts early.
  EXPECT_EQ(members(computeBucketLayout(mlp(), kMiB, 1000 * kMiB)),
            (std::vector<std::vector<std::size_t>>{{5, 4, 3, 2}, {1, 0}}));
}

TEST(BucketLayout, SingleBucketPutsEverythingInOne) {
  const auto buckets = computeBucketLayout(mlp(), kMiB, kSingleBucket);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].gradients, (std::vector<std::size_t>{5, 4, 3, 2, 1, 0}));
}

TEST(BucketLayout, SmallCapsSplitAtTheCap) {
  // cap 1 MiB everywhere: [5,4,3,2] reaches it, then [1,0] (3 MiB) on its own.
  EXPECT_EQ(members(computeBucketLayout(mlp(), kMiB, kMiB)),
            (std::vector<std::vector<std::size_t>>{{5, 4, 3, 2}, {1, 0}}));
  // 64 KiB first bucket, then 16 KiB caps: every larger gradient closes its bucket at once.
  std::vector<GradientSpec> same(8, GradientSpec{"g", 4096});  // 16 KiB each
  EXPECT_EQ(members(computeBucketLayout(same, 64 * 1024, 16 * 1024)),
            (std::vector<std::vector<std::size_t>>{{7, 6, 5, 4}, {3}, {2}, {1}, {0}}));
}

TEST(BucketLayout, FrozenGradientsAreInNoBucket) {
  auto specs = mlp();
  specs[0].requiresGrad = specs[1].requiresGrad = false;
  const auto buckets = computeBucketLayout(specs, kMiB, 25 * kMiB);
  EXPECT_EQ(members(buckets), (std::vector<std::vector<std::size_t>>{{5, 4, 3, 2}}));
}

TEST(BucketLayout, OffsetsAreContiguous) {
  std::size_t expected = 0;
  for (const Bucket& b : computeBucketLayout(mlp(), 0, 0)) {
    EXPECT_EQ(b.offset, expected);
    expected += b.count;
  }
}

}  // namespace
}  // namespace ddp::comm
