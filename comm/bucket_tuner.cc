#include "comm/bucket_tuner.h"

#include <algorithm>

#include "comm/reducer.h"
#include "runtime/error.h"

namespace ddp::comm {

BucketCapTuner::BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps,
                               std::size_t timedRounds)
    : candidates_(std::move(candidates)),
      warmupLeft_(warmupSteps),
      timedRounds_(timedRounds),
      times_(candidates_.size()) {
  if (candidates_.empty()) throw UsageError("bucket cap tuning needs at least one candidate");
  DDP_CHECK(timedRounds_ > 0, "bucket cap tuning needs timed rounds");
  if (candidates_.size() == 1) {
    medians_ = {0.0};
    chosen_ = candidates_[0];
  }
}

std::vector<std::size_t> BucketCapTuner::defaultCandidates() {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  return {1 * kMiB, 5 * kMiB, 25 * kMiB, 100 * kMiB, kSingleBucket};
}

std::size_t BucketCapTuner::candidate() const {
  return round_ % 2 == 0 ? position_ : candidates_.size() - 1 - position_;
}

std::size_t BucketCapTuner::currentCap() const {
  return chosen_ ? *chosen_ : candidates_[candidate()];
}

std::size_t BucketCapTuner::chosen() const {
  DDP_CHECK(chosen_.has_value(), "the bucket cap is not chosen yet");
  return *chosen_;
}

void BucketCapTuner::recordStep(double seconds, Communicator& comm) {
  if (chosen_) return;
  if (warmupLeft_ > 0) {
    --warmupLeft_;
    return;
  }
  times_[candidate()].push_back(seconds);
  if (++position_ < candidates_.size()) return;
  position_ = 0;
  if (++round_ < timedRounds_) return;
  // Every rank has timed every candidate: the slowest rank's medians decide.
  for (std::vector<double>& times : times_) {
    std::sort(times.begin(), times.end());
    const std::size_t mid = times.size() / 2;
    medians_.push_back(times.size() % 2 == 1 ? times[mid] : (times[mid - 1] + times[mid]) / 2);
  }
  comm.allreduceSync(std::span<double>(medians_), ReduceOp::kMax);
  const auto best = std::min_element(medians_.begin(), medians_.end());
  chosen_ = candidates_[static_cast<std::size_t>(best - medians_.begin())];
}

}  // namespace ddp::comm
