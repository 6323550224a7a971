// DistributedSampler: PyTorch's semantics, checked over dataset sizes that do
// and do not divide by the world size, with and without drop_last.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "trainer/distributed_sampler.h"

namespace ddp::trainer {
namespace {

using Case = std::tuple<std::size_t /*size*/, int /*world*/, bool /*dropLast*/, bool /*shuffle*/>;

class SamplerCoverage : public ::testing::TestWithParam<Case> {};

TEST_P(SamplerCoverage, EverySampleOncePerEpochAcrossRanks) {
  const auto [size, world, dropLast, shuffle] = GetParam();
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::map<std::size_t, int> seen;
    std::size_t total = 0;
    std::size_t perRank = 0;
    for (int rank = 0; rank < world; ++rank) {
      DistributedSampler sampler(size, world, rank, {shuffle, dropLast, 7});
      sampler.setEpoch(epoch);
      const auto shard = sampler.indices();
      perRank = sampler.samplesPerRank();
      ASSERT_EQ(shard.size(), perRank) << "rank " << rank;
      for (std::size_t index : shard) {
        ASSERT_LT(index, size);
        ++seen[index];
      }
      total += shard.size();
    }
    const auto w = static_cast<std::size_t>(world);
    if (dropLast) {
      // floor(n / world) each; nothing repeats; exactly n % world samples are left out.
      EXPECT_EQ(perRank, size / w);
      EXPECT_EQ(seen.size(), total);
      EXPECT_EQ(size - seen.size(), size % w);
      for (const auto& entry : seen)
        EXPECT_EQ(entry.second, 1);
    } else {
      // ceil(n / world) each; every sample at least once; the padding repeats
      // only (world - n % world) % world samples once more.
      EXPECT_EQ(perRank, (size + w - 1) / w);
      EXPECT_EQ(seen.size(), size);
      std::size_t repeats = 0;
      for (const auto& entry : seen)
        repeats += static_cast<std::size_t>(entry.second - 1);
      EXPECT_EQ(repeats, total - size);
      if (size >= w) {
        for (const auto& entry : seen)
          EXPECT_LE(entry.second, 2);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SamplerCoverage,
                         ::testing::Combine(::testing::Values(1, 2, 10, 11, 13, 97, 100),
                                            ::testing::Values(1, 2, 3, 4, 7), ::testing::Bool(),
                                            ::testing::Bool()));

TEST(Sampler, PaddingRepeatsTheHeadOfTheOrder) {
  // 10 samples, 4 ranks, no shuffle: order 0..9 padded with 0, 1 -> 12 positions.
  std::vector<std::size_t> all;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(10, 4, rank, {false, false, 0});
    const auto shard = sampler.indices();
    EXPECT_EQ(shard.size(), 3u);
    for (std::size_t i = 0; i < shard.size(); ++i)
      all.push_back(shard[i]);
  }
  // rank r holds positions r, r+4, r+8 of [0..9, 0, 1].
  const std::vector<std::size_t> expected = {0, 4, 8, 1, 5, 9, 2, 6, 0, 3, 7, 1};
  EXPECT_EQ(all, expected);
}

TEST(Sampler, PaddingWrapsWhenTheDatasetIsSmallerThanTheWorld) {
  std::multiset<std::size_t> all;
  for (int rank = 0; rank < 7; ++rank) {
    DistributedSampler sampler(2, 7, rank, {false, false, 0});
    for (std::size_t i : sampler.indices())
      all.insert(i);
  }
  EXPECT_EQ(all.size(), 7u);
  EXPECT_EQ(all.count(0), 4u);
  EXPECT_EQ(all.count(1), 3u);
}

TEST(Sampler, NoShuffleIsStridedFileOrder) {
  DistributedSampler sampler(8, 2, 1, {false, false, 0});
  EXPECT_EQ(sampler.indices(), (std::vector<std::size_t>{1, 3, 5, 7}));
}

TEST(Sampler, SamePermutationOnEveryRankSoShardsInterleave) {
  // Ranks must draw the same permutation: rank r's i-th sample is position
  // i*world + r of one shared order, so the shards are disjoint.
  std::vector<std::vector<std::size_t>> shards;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(1000, 4, rank, {true, true, 123});
    sampler.setEpoch(5);
    shards.push_back(sampler.indices());
  }
  DistributedSampler single(1000, 1, 0, {true, true, 123});
  single.setEpoch(5);
  const auto order = single.indices();
  for (std::size_t i = 0; i < 250; ++i) {
    for (int rank = 0; rank < 4; ++rank)
      ASSERT_EQ(shards[rank][i], order[i * 4 + rank]);
  }
}

TEST(Sampler, OrderChangesWithEpochAndSeedButNotWithRepetition) {
  DistributedSampler a(500, 2, 0, {true, false, 1});
  a.setEpoch(0);
  const auto epoch0 = a.indices();
  EXPECT_EQ(a.indices(), epoch0);  // deterministic
  a.setEpoch(1);
  EXPECT_NE(a.indices(), epoch0);
  DistributedSampler b(500, 2, 0, {true, false, 2});
  EXPECT_NE(b.indices(), epoch0);
}

TEST(EvaluationShard, CountsEverySampleExactlyOnce) {
  for (std::size_t size : {1u, 9u, 10u, 10000u}) {
    for (int world : {1, 2, 3, 4}) {
      std::vector<int> seen(size, 0);
      for (int rank = 0; rank < world; ++rank) {
        for (std::size_t i : evaluationShard(size, world, rank))
          ++seen[i];
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }))
          << size << " samples on " << world << " ranks";
    }
  }
}

// Resuming mid-epoch (a checkpoint): the same world size continues with
// exactly the tail of each rank's shard; another world size sees every sample
// the first part of the epoch did not, once, plus at most world - 1 padding
// repeats (or, with drop_last, at most world - 1 samples left out).
using ReshardCase =
    std::tuple<std::size_t /*size*/, int /*before*/, int /*after*/, bool /*dropLast*/>;

class SamplerReshard : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(SamplerReshard, RemainingSamplesAreCoveredOnce) {
  const auto [size, before, after, dropLast] = GetParam();
  const SamplerOptions options{true, dropLast, 11};
  DistributedSampler first(size, before, 0, options);
  first.setEpoch(2);
  for (std::size_t steps :
       {std::size_t{0}, std::size_t{1}, first.samplesPerRank() / 2, first.samplesPerRank()}) {
    const std::size_t consumed = steps * static_cast<std::size_t>(before);
    // What the first run trained on: the first `steps` of every rank's shard.
    std::multiset<std::size_t> trained;
    for (int rank = 0; rank < before; ++rank) {
      DistributedSampler sampler(size, before, rank, options);
      sampler.setEpoch(2);
      const auto shard = sampler.indices();
      trained.insert(shard.begin(), shard.begin() + static_cast<std::ptrdiff_t>(steps));
      if (after == before) {
        const auto rest = sampler.remainingIndices(consumed);
        ASSERT_TRUE(std::equal(rest.begin(), rest.end(),
                               shard.begin() + static_cast<std::ptrdiff_t>(steps), shard.end()))
            << "same world size: not the tail of rank " << rank << "'s shard";
      }
    }
    std::multiset<std::size_t> resumed;
    std::size_t perRank = 0;
    for (int rank = 0; rank < after; ++rank) {
      DistributedSampler sampler(size, after, rank, options);
      sampler.setEpoch(2);
      const auto rest = sampler.remainingIndices(consumed);
      if (rank == 0) perRank = rest.size();
      ASSERT_EQ(rest.size(), perRank) << "ranks must take the same number of steps";
      resumed.insert(rest.begin(), rest.end());
    }
    std::size_t padding = 0, missing = 0;
    for (std::size_t i = 0; i < size; ++i) {
      const std::size_t before = trained.count(i) > 0 ? 1 : 0;
      const std::size_t now = resumed.count(i);
      if (before == 0 && now == 0) ++missing;
      if (before + now > 1) padding += before + now - 1;
    }
    const auto limit = static_cast<std::size_t>(std::max(before, after) - 1);
    if (dropLast) {
      EXPECT_EQ(padding, 0u) << "drop_last never repeats a sample";
      EXPECT_LE(missing, static_cast<std::size_t>(before + after - 2)) << "steps " << steps;
    } else {
      EXPECT_EQ(missing, 0u) << "a sample was skipped after " << steps << " steps";
      EXPECT_LE(padding, 2 * limit) << "steps " << steps;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, SamplerReshard,
                         ::testing::Combine(::testing::Values(1000, 1001, 37),
                                            ::testing::Values(1, 2, 3), ::testing::Values(1, 2, 4),
                                            ::testing::Bool()));

}  // namespace
}  // namespace ddp::trainer
