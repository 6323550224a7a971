// --bucket-cap-mb auto (Note [Automatic bucket cap]): every rank picks the
// same cap even when each rank measured different times, it is the cap
// whose steps were fastest counting each step as its slowest rank, and the
// candidates take turns so that a drift in speed during tuning does not
// decide.
#include "comm/bucket_tuner.h"

#include <gtest/gtest.h>

#include "comm/reducer.h"
#include "test_comm.h"

namespace ddp::comm {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs the tuner with step times from `time(rank, candidate, step)`; returns
// the choice. Checks the schedule: one warm-up step on the first candidate,
// then `rounds` rounds in serpentine order (0, 1, ..., then ..., 1, 0), with
// at most `maxRounds`.
template <class F>
std::size_t tune(Communicator& comm, const std::vector<std::size_t>& caps, F time,
                 std::size_t maxRounds = 4, std::size_t rounds = 4) {
  BucketCapTuner tuner(caps, /*warmupSteps=*/1, /*timedRounds=*/4, maxRounds);
  const std::size_t c = caps.size();
  std::size_t steps = 0;
  while (tuner.tuning()) {
    const std::size_t candidate = static_cast<std::size_t>(
        std::find(caps.begin(), caps.end(), tuner.currentCap()) - caps.begin());
    const std::size_t position = steps == 0 ? 0 : (steps - 1) % c,
                      round = steps == 0 ? 0 : (steps - 1) / c;
    EXPECT_EQ(candidate, round % 2 == 0 ? position : c - 1 - position) << "step " << steps;
    tuner.recordStep(time(comm.rank(), candidate, steps), comm);
    ++steps;
  }
  EXPECT_EQ(steps, 1 + c * rounds);
  EXPECT_EQ(tuner.rounds(), rounds);
  EXPECT_EQ(tuner.steps(), steps);
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
    return step == 0 ? 0.0 : t + (step % 2 == 0 ? 0.001 : 0.0);  // the warm-up step must not count
  });
  EXPECT_EQ(chosen, 25 * kMiB);
  std::uint64_t mine = chosen, agreed = 0;
  MPI_Allreduce(&mine, &agreed, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
  EXPECT_EQ(agreed, n % 2 == 0 ? 0u : mine);  // identical on every rank
}

// A step is as slow as its slowest rank, and with more ranks than cores a
// different rank is held up in each step. Candidate 0 has one slow rank in
// each of its first steps, a different one each time: every rank's own median
// is fast (1.0), but the slowest rank of most steps takes 3.0. Candidate 1
// takes 1.5 on every rank. Medians of each step's slowest rank pick candidate
// 1; the slowest of the ranks' own medians would pick candidate 0.
TEST(BucketCapTuner, EachStepCountsAsItsSlowestRank) {
  auto comm = makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  const std::vector<std::size_t> caps = {1 * kMiB, kSingleBucket};
  const std::size_t chosen = tune(*comm, caps, [](int rank, std::size_t c, std::size_t step) {
    if (c == 1) return 1.5;
    const std::size_t round = step == 0 ? 0 : (step - 1) / 2;
    return round == static_cast<std::size_t>(rank) ? 3.0 : 1.0;
  });
  EXPECT_EQ(chosen, kSingleBucket);
}

TEST(BucketCapTuner, TiesGoToTheEarlierCandidateAndWarmUpStepsAreIgnored) {
  auto comm = makeTestComm();
  const std::vector<std::size_t> caps = {5 * kMiB, 1 * kMiB, 100 * kMiB};
  BucketCapTuner tuner(caps, /*warmupSteps=*/2, /*timedRounds=*/4);
  std::size_t step = 0;
  while (tuner.tuning()) {
    tuner.recordStep(step < 2 ? 100.0 : 1.0, *comm);  // warm-up steps are very slow
    ++step;
  }
  EXPECT_EQ(step, 2 + 4 * caps.size()) << "identical steps are precise: no extra rounds";
  EXPECT_EQ(tuner.chosen(), 5 * kMiB);
  ASSERT_EQ(tuner.medians().size(), 3u);
  for (double m : tuner.medians())
    EXPECT_EQ(m, 1.0);
}

// The machine slows down steadily while the tuner runs (another job starts):
// 5% per step, against a candidate that is truly 3% faster. Trying each
// candidate in a block of steps would credit the drift to whichever came
// first; even plain turns (0, 1, 2, 0, 1, 2) would favour candidate 0.
// Serpentine turns give every candidate the same median position.
TEST(BucketCapTuner, ASteadyDriftDoesNotDecide) {
  auto comm = makeTestComm();
  const std::vector<std::size_t> caps = {1 * kMiB, 25 * kMiB, kSingleBucket};
  const std::size_t chosen = tune(*comm, caps, [](int, std::size_t c, std::size_t step) {
    const double drift = 1.0 + 0.05 * static_cast<double>(step);
    return drift * (c == 1 ? 0.97 : 1.0);
  });
  EXPECT_EQ(chosen, 25 * kMiB);
}

// The median, not the mean: one step hit by a hiccup does not sink a candidate.
TEST(BucketCapTuner, OneSlowStepDoesNotSinkACandidate) {
  auto comm = makeTestComm();
  const std::vector<std::size_t> caps = {1 * kMiB, 25 * kMiB};
  const std::size_t chosen = tune(*comm, caps, [](int, std::size_t c, std::size_t step) {
    if (c == 0 && step == 3) return 50.0;  // one hiccup on the faster candidate
    return c == 0 ? 1.0 : 1.1;
  });
  EXPECT_EQ(chosen, 1 * kMiB);
}

// Step times scattered by about 11% (sigma): 4 rounds would give medians
// known to about 7%, not enough to tell a 10% difference reliably, so the
// tuner goes on to its 12 rounds and finds the faster candidate. The same
// candidates on a quiet machine are decided after 4 rounds.
TEST(BucketCapTuner, NoisyStepsGetMoreRoundsQuietOnesDoNot) {
  auto comm = makeTestComm();
  const std::vector<std::size_t> caps = {1 * kMiB, 25 * kMiB, kSingleBucket};
  const double base[] = {1.0, 0.9, 1.0};
  EXPECT_EQ(tune(
                *comm, caps, [&](int, std::size_t c, std::size_t) { return base[c]; }, 12, 4),
            25 * kMiB);
  EXPECT_EQ(tune(
                *comm, caps,
                [&](int, std::size_t c, std::size_t step) {
                  const double noise = 0.075 * static_cast<double>((step * 7) % 5) - 0.15;
                  return base[c] * (1.0 + noise);
                },
                12, 12),
            25 * kMiB);
}

TEST(BucketCapTuner, OneCandidateNeedsNoTuning) {
  BucketCapTuner tuner({25 * kMiB});
  EXPECT_FALSE(tuner.tuning());
  EXPECT_EQ(tuner.chosen(), 25 * kMiB);
}

}  // namespace
}  // namespace ddp::comm
