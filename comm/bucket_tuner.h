// BucketCapTuner: --bucket-cap-mb auto.
//
// Note [Automatic bucket cap]
// The best bucket cap depends on the model (how gradients are spread over
// layers), the compute speed and the link: small buckets start
// communicating early but pay a latency per all-reduce; large ones pay it
// once but start late. Instead of a model of all that, the first steps of the
// run try each candidate cap in turn (a warm-up step, since the first step on
// new buckets pays for page faults, then a few timed steps) and keep the cap
// with the lowest median step time. Each rank times its own steps; one
// all-reduce (max: a step is as slow as its slowest rank) then gives every
// rank the same table, so every rank picks the same cap without further
// agreement (ties go to the earlier candidate). The steps spent trying are
// real training steps; the buckets only change between steps, and because
// the shared-memory all-reduce sums each element in rank order whatever the
// bucket, the result does not depend on the cap.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "comm/communicator.h"

namespace ddp::comm {

class BucketCapTuner {
 public:
  // `candidates`: caps in bytes (kSingleBucket allowed), tried in order;
  // each gets `warmupSteps` untimed and `timedSteps` timed steps.
  BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps = 1,
                 std::size_t timedSteps = 3);

  // The caps ddp tries by default: 1, 5, 25 and 100 MiB and a single bucket.
  static std::vector<std::size_t> defaultCandidates();

  // The cap the next step must use: a candidate while tuning, then the choice.
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
  std::size_t warmupSteps_;
  std::size_t timedSteps_;
  std::size_t candidate_ = 0;  // index being tried
  std::size_t stepsOnCandidate_ = 0;
  std::vector<double> times_;    // this candidate's timed steps
  std::vector<double> medians_;  // per candidate: this rank's, then (after tuning) the max
  std::optional<std::size_t> chosen_;
};

}  // namespace ddp::comm
