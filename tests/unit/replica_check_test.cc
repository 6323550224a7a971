// Note [Checking that the replicas agree]: which ranks a divergence names,
// and against whom, from hand-made CRC tables.
#include "trainer/replica_check.h"

#include <gtest/gtest.h>

namespace ddp::trainer {
namespace {

const std::vector<std::string> kNames = {"layers.0.weight", "layers.0.bias",
                                         "optimizer.momentum.layers.0.weight"};
const ReplicaCheckPoint kAt{3, 1407, 938};

TEST(ReplicaCheck, EqualReplicasPass) {
  const std::vector<std::int64_t> row = {0x1111, 0x2222, 0x3333};
  EXPECT_FALSE(describeDivergence({row, row, row}, kNames, {"a", "a", "b"}, kAt));
  EXPECT_FALSE(describeDivergence({row}, kNames, {"a"}, kAt));
}

TEST(ReplicaCheck, TheRankOutsideTheMajorityIsNamedWithItsFirstDifferingTensor) {
  const std::vector<std::int64_t> good = {0x1111, 0x2222, 0x3333};
  const std::vector<std::int64_t> bad = {0x1111, 0xabcdef12, 0x4444};
  EXPECT_EQ(describeDivergence({good, good, bad, good}, kNames, {"a", "a", "b", "b"}, kAt),
            "the replicas have diverged between step 938 and step 1407 (epoch 3): one rank holds "
            "a different model from the other 3 ranks: rank 2 (b): layers.0.bias has CRC-32 "
            "abcdef12 against 00002222. Every rank applies the same averaged gradients, so only a "
            "fault can do this: a memory or CPU error on that host, or a bug in ddp. Every "
            "checkpoint so far (step 938 and earlier) was written while the replicas agreed");
  // Rank 0 itself can be the odd one: the majority is the reference, not rank 0.
  const auto zero = describeDivergence({bad, good, good}, kNames, {"a", "b", "c"}, kAt);
  ASSERT_TRUE(zero);
  EXPECT_NE(zero->find("from the other 2 ranks: rank 0 (a): layers.0.bias"), std::string::npos)
      << *zero;
}

TEST(ReplicaCheck, WithoutAMajorityRankZerosGroupIsTheReference) {
  const std::vector<std::int64_t> one = {0x1111, 0x2222, 0x3333};
  const std::vector<std::int64_t> other = {0x9999, 0x2222, 0x3333};
  const auto pair = describeDivergence({one, other}, kNames, {"a", "b"}, kAt);
  ASSERT_TRUE(pair);
  EXPECT_NE(pair->find("from rank 0's group of 1 (there is no majority to tell which is right): "
                       "rank 1 (b): layers.0.weight has CRC-32 00009999 against 00001111"),
            std::string::npos)
      << *pair;
  const auto halves = describeDivergence({one, other, one, other}, kNames, {}, kAt);
  ASSERT_TRUE(halves);
  EXPECT_NE(halves->find("ranks hold a different model from rank 0's group of 2 (there is no "
                         "majority to tell which is right): rank 1: layers.0.weight has CRC-32 "
                         "00009999 against 00001111; rank 3: layers.0.weight"),
            std::string::npos)
      << *halves;
  EXPECT_NE(halves->find("on those hosts"), std::string::npos) << *halves;
}

}  // namespace
}  // namespace ddp::trainer
