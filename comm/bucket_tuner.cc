#include "comm/bucket_tuner.h"

#include <algorithm>

#include "comm/reducer.h"
#include "runtime/error.h"

namespace ddp::comm {

BucketCapTuner::BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps,
                               std::size_t timedSteps)
    : candidates_(std::move(candidates)), warmupSteps_(warmupSteps), timedSteps_(timedSteps) {
  if (candidates_.empty()) throw UsageError("bucket cap tuning needs at least one candidate");
  DDP_CHECK(timedSteps_ > 0, "bucket cap tuning needs timed steps");
  if (candidates_.size() == 1) {
    medians_ = {0.0};
    chosen_ = candidates_[0];
  }
}

std::vector<std::size_t> BucketCapTuner::defaultCandidates() {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  return {1 * kMiB, 5 * kMiB, 25 * kMiB, 100 * kMiB, kSingleBucket};
}

std::size_t BucketCapTuner::currentCap() const {
  return chosen_ ? *chosen_ : candidates_[candidate_];
}

std::size_t BucketCapTuner::chosen() const {
  DDP_CHECK(chosen_.has_value(), "the bucket cap is not chosen yet");
  return *chosen_;
}

void BucketCapTuner::recordStep(double seconds, Communicator& comm) {
  if (chosen_) return;
  if (stepsOnCandidate_++ >= warmupSteps_) times_.push_back(seconds);
  if (times_.size() < timedSteps_) return;
  std::nth_element(times_.begin(), times_.begin() + static_cast<long>(times_.size() / 2),
                   times_.end());
  medians_.push_back(times_[times_.size() / 2]);
  times_.clear();
  stepsOnCandidate_ = 0;
  if (++candidate_ < candidates_.size()) return;
  // Every rank has timed every candidate: the slowest rank's medians decide.
  comm.allreduceSync(std::span<double>(medians_), ReduceOp::kMax);
  const auto best = std::min_element(medians_.begin(), medians_.end());
  chosen_ = candidates_[static_cast<std::size_t>(best - medians_.begin())];
}

}  // namespace ddp::comm
