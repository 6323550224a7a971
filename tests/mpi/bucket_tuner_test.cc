// --bucket-cap-mb auto (Note [Automatic bucket cap]): every rank picks the
// same cap even when each rank measured different times, and it is the cap
// whose slowest rank was fastest.
#include "comm/bucket_tuner.h"

#include <gtest/gtest.h>

#include "comm/reducer.h"
#include "test_comm.h"

namespace ddp::comm {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs the tuner with step times from `time(rank, candidate, step)`; returns the choice.
template <class F>
std::size_t tune(Communicator& comm, const std::vector<std::size_t>& caps, F time) {
  BucketCapTuner tuner(caps, /*warmupSteps=*/1, /*timedSteps=*/3);
  std::size_t steps = 0;
  while (tuner.tuning()) {
    const std::size_t candidate = static_cast<std::size_t>(
        std::find(caps.begin(), caps.end(), tuner.currentCap()) - caps.begin());
    tuner.recordStep(time(comm.rank(), candidate, steps), comm);
    ++steps;
  }
  EXPECT_EQ(steps, caps.size() * 4);
  return tuner.chosen();
}

TEST(BucketCapTuner, EveryRankChoosesTheCapWhoseSlowestRankIsFastest) {
  auto comm = makeTestComm();
  const int n = comm->size();
  const std::vector<std::size_t> caps = {1 * kMiB, 5 * kMiB, 25 * kMiB, kSingleBucket};
  // Rank r finds candidate (r % 4) fastest; but the last rank is slow on
  // every candidate except 25 MiB, so the slowest rank's times favour 25 MiB.
  const std::size_t chosen = tune(*comm, caps, [&](int rank, std::size_t c, std::size_t step) {
    double t = c == static_cast<std::size_t>(rank % 4) ? 1.0 : 2.0;
    if (rank == n - 1) t = c == 2 ? 2.5 : 4.0;
    return t + (step % 2 == 0 ? 0.001 : 0.0);  // the warm-up step's time must not matter
  });
  EXPECT_EQ(chosen, 25 * kMiB);
  std::uint64_t mine = chosen, agreed = 0;
  MPI_Allreduce(&mine, &agreed, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
  EXPECT_EQ(agreed, n % 2 == 0 ? 0u : mine);  // identical on every rank
}

TEST(BucketCapTuner, TiesGoToTheEarlierCandidateAndWarmUpStepsAreIgnored) {
  auto comm = makeTestComm();
  const std::vector<std::size_t> caps = {5 * kMiB, 1 * kMiB, 100 * kMiB};
  std::vector<double> medians;
  BucketCapTuner tuner(caps, 1, 3);
  std::size_t step = 0;
  while (tuner.tuning()) {
    // Warm-up steps (the first of each candidate) are very slow.
    tuner.recordStep(step % 4 == 0 ? 100.0 : 1.0, *comm);
    ++step;
  }
  EXPECT_EQ(tuner.chosen(), 5 * kMiB);
  ASSERT_EQ(tuner.medians().size(), 3u);
  for (double m : tuner.medians())
    EXPECT_EQ(m, 1.0);
}

TEST(BucketCapTuner, OneCandidateNeedsNoTuning) {
  BucketCapTuner tuner({25 * kMiB});
  EXPECT_FALSE(tuner.tuning());
  EXPECT_EQ(tuner.chosen(), 25 * kMiB);
}

}  // namespace
}  // namespace ddp::comm
