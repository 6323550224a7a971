// BucketCapTuner: --bucket-cap-mb auto.
//
// Note [Automatic bucket cap]
// The best bucket cap depends on the model (how gradients are spread over
// layers), the compute speed and the link: small buckets start
// communicating early but pay a latency per all-reduce; large ones pay it
// once but start late. Instead of a model of all that, the first steps of the
// run try the candidate caps and keep the one with the lowest median step
// time. After `warmupSteps` untimed steps (first-touch page faults), the
// candidates take turns, one step each, in serpentine rounds: 0, 1, ..., C-1,
// then C-1, ..., 1, 0, and so on, an even number of rounds. A machine whose
// speed drifts steadily over the tuning window (another job starting, clock
// changes) then slows every candidate alike: each one's median position in
// the window is the same. Trying each candidate in a block of consecutive
// steps would blame the drift on whichever candidate ran during it, and even
// plain turns would favour the candidate that always goes first. Switching is cheap because every
// cap partitions the same gradient storage (Reducer::setBucketCaps): nothing is allocated or paged
// in, so no step per switch is wasted as a warm-up. Each rank times its own steps; one all-reduce
// (max: a step is as slow as its slowest rank) then gives every rank the same table, so every rank
// picks the same cap without further agreement (ties go to the earlier candidate). The steps spent
// trying are real training steps; the buckets only change between steps, and because the
// shared-memory all-reduce sums each element in rank order whatever the bucket, the result does not
// depend on the cap.
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
  // round for `timedRounds` rounds, in serpentine order (even: drift-free).
  BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps = 1,
                 std::size_t timedRounds = 4);

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

  // After tuning: the chosen cap and each candidate's median step time, the
  // slowest rank's (seconds), the same on every rank.
  std::size_t chosen() const;
  const std::vector<double>& medians() const { return medians_; }
  const std::vector<std::size_t>& candidates() const { return candidates_; }

 private:
  std::vector<std::size_t> candidates_;
  std::size_t warmupLeft_;
  std::size_t timedRounds_;
  std::size_t position_ = 0;                // within the round
  std::size_t round_ = 0;                   // timed rounds completed
  std::vector<std::vector<double>> times_;  // per candidate: this rank's timed steps
  std::vector<double> medians_;             // per candidate, after tuning: the slowest rank's
  std::optional<std::size_t> chosen_;

  // The candidate index the next step uses.
  std::size_t candidate() const;
};

}  // namespace ddp::comm
