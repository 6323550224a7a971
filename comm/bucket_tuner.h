// BucketCapTuner: --bucket-cap-mb auto.
//
// Note [Automatic bucket cap]
// The best bucket cap depends on the model (how gradients are spread over
// layers), the compute speed and the link: small buckets start communicating
// early but pay a latency per all-reduce; large ones pay it once but start
// late. Instead of a model of all that, the first steps of the run try the
// candidate caps and keep the one with the lowest median step time.
//
// Taking turns. After `warmupSteps` untimed steps (first-touch page faults),
// the candidates take turns, one step each, in serpentine rounds: 0, 1, ...,
// C-1, then C-1, ..., 1, 0, and so on, always an even number of rounds. A
// machine whose speed drifts steadily over the tuning window (another job
// starting, clock changes) then slows every candidate alike: each one's
// median position in the window is the same. Trying each candidate in a block
// of consecutive steps would blame the drift on whichever candidate ran
// during it, and even plain turns would favour the candidate that always
// goes first. Switching is cheap because every cap partitions the same
// gradient storage (Reducer::setBucketCaps): nothing is allocated or paged
// in, so no step per switch is wasted as a warm-up.
//
// How many rounds. The median of n steps whose times scatter by a relative
// sigma is known to about 1.25 sigma / sqrt(n). After `timedRounds` rounds,
// and every two rounds after that, the tuner estimates sigma from the steps
// themselves (1.4826 x the median absolute deviation, relative to the median,
// the median over candidates) and stops once the medians are known to 2%
// (kMedianPrecision), or at `maxRounds`. A quiet machine stops after the
// first 4 rounds (21 steps with 5 candidates); a noisy one, such as 4 ranks
// sharing 2 cores, takes up to 12 (61 steps) instead of deciding on noise.
//
// Agreement. Each rank times its own steps; at each decision one all-reduce
// (max) of all the step times so far gives every rank the same table, so
// every rank makes the same decision without further agreement (ties go to
// the earlier candidate). The max is taken per step, before the median: a
// step is as slow as its slowest rank. The slowest of the ranks' own medians
// would not do: with more ranks than cores a different rank is held up in
// each step, every rank's own median looks fast, and a cap that stalls some
// rank in most steps wins (it did: BERT at 4 ranks on 2 cores chose 25 MiB
// in 3 runs of 3; it looked 14-30% faster than the caps' mean while tuning
// and was not faster when measured after).
//
// The steps spent trying are real training steps; the buckets only change
// between steps, and because the shared-memory all-reduce sums each element
// in rank order whatever the bucket, the result does not depend on the cap.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "comm/communicator.h"

namespace ddp::comm {

class BucketCapTuner {
 public:
  // `candidates`: caps in bytes (kSingleBucket allowed). After `warmupSteps`
  // untimed steps on the first candidate, each candidate gets one step per
  // round, in serpentine order, for `timedRounds` rounds and then two more
  // at a time while the medians are not yet precise, up to `maxRounds`.
  // Round counts must be even (drift-free).
  BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps = 1,
                 std::size_t timedRounds = 4, std::size_t maxRounds = 12);

  // The relative precision the medians must reach before the tuner decides.
  static constexpr double kMedianPrecision = 0.02;

  // The caps ddp tries by default: 1, 5, 25 and 100 MiB and a single bucket.
  static std::vector<std::size_t> defaultCandidates();

  // The cap the next step must use: a candidate while tuning, then the choice.
  // Changes after (almost) every step while tuning.
  std::size_t currentCap() const;
  bool tuning() const { return !chosen_.has_value(); }
  // Records the step just run with currentCap(). Collective on the step that
  // completes the last candidate (every rank calls it after every step until
  // tuning() is false; the ranks run the same steps, so they agree on which).
  void recordStep(double seconds, Communicator& comm);

  // After tuning: the chosen cap and each candidate's median over its steps
  // of each step's slowest rank (seconds), the same on every rank; the
  // rounds it took.
  std::size_t chosen() const;
  const std::vector<double>& medians() const { return medians_; }
  const std::vector<std::size_t>& candidates() const { return candidates_; }
  std::size_t rounds() const { return timedSteps() / candidates_.size(); }
  // Steps recorded so far (warm-up included): the steps tuning took, once done.
  std::size_t steps() const { return steps_; }

 private:
  std::vector<std::size_t> candidates_;
  std::size_t warmupSteps_;
  std::size_t timedRounds_;
  std::size_t maxRounds_;
  std::size_t steps_ = 0;                   // recorded, warm-up included
  std::vector<std::vector<double>> times_;  // per candidate: this rank's timed steps
  std::vector<double> medians_;             // per candidate, after tuning; see medians()
  std::optional<std::size_t> chosen_;

  // Recorded steps after the warm-up; the candidate index the next step uses
  // (both follow from steps_: rounds of one step per candidate, serpentine).
  std::size_t timedSteps() const;
  std::size_t candidate() const;
};

}  // namespace ddp::comm
