#include "comm/bucket_tuner.h"

#include <algorithm>
#include <cmath>

#include "comm/reducer.h"
#include "runtime/error.h"

namespace ddp::comm {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// A robust relative sigma of `times`: 1.4826 x MAD / median (the factor
// makes the MAD of normal noise equal its sigma).
double relativeSigma(const std::vector<double>& times) {
  const double middle = median(times);
  if (middle <= 0) return 0;
  std::vector<double> deviations;
  for (double t : times)
    deviations.push_back(std::abs(t - middle));
  return 1.4826 * median(deviations) / middle;
}

}  // namespace

BucketCapTuner::BucketCapTuner(std::vector<std::size_t> candidates, std::size_t warmupSteps,
                               std::size_t timedRounds, std::size_t maxRounds)
    : candidates_(std::move(candidates)),
      warmupSteps_(warmupSteps),
      timedRounds_(timedRounds),
      maxRounds_(maxRounds),
      times_(candidates_.size()) {
  if (candidates_.empty()) throw UsageError("bucket cap tuning needs at least one candidate");
  DDP_CHECK(timedRounds_ > 0 && timedRounds_ % 2 == 0 && maxRounds_ % 2 == 0 &&
                maxRounds_ >= timedRounds_,
            "bucket cap tuning needs an even number of rounds, at most maxRounds");
  if (candidates_.size() == 1) {
    medians_ = {0.0};
    chosen_ = candidates_[0];
  }
}

std::vector<std::size_t> BucketCapTuner::defaultCandidates() {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  return {1 * kMiB, 5 * kMiB, 25 * kMiB, 100 * kMiB, kSingleBucket};
}

std::size_t BucketCapTuner::timedSteps() const {
  return steps_ > warmupSteps_ ? steps_ - warmupSteps_ : 0;
}

std::size_t BucketCapTuner::candidate() const {
  const std::size_t c = candidates_.size(), position = timedSteps() % c;
  return rounds() % 2 == 0 ? position : c - 1 - position;
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
  const std::size_t ran = candidate();  // the step just run
  if (++steps_ <= warmupSteps_) return;
  times_[ran].push_back(seconds);
  if (timedSteps() % candidates_.size() != 0) return;  // the round goes on
  const std::size_t round = rounds();
  if (round < timedRounds_ || (round - timedRounds_) % 2 != 0) return;
  // A decision point (Note [Automatic bucket cap]): every rank reaches it
  // after the same step, with `round` steps per candidate. One all-reduce
  // (max) turns each step's time into its slowest rank's; the medians and the
  // scatter are taken over those.
  std::vector<double> slowest;
  for (const std::vector<double>& times : times_)
    slowest.insert(slowest.end(), times.begin(), times.end());
  comm.allreduceSync(std::span<double>(slowest), ReduceOp::kMax);
  std::vector<double> table;
  std::vector<double> sigmas;
  for (std::size_t c = 0; c < candidates_.size(); ++c) {
    const auto first = slowest.begin() + static_cast<long>(c * round);
    const std::vector<double> times(first, first + static_cast<long>(round));
    table.push_back(median(times));
    sigmas.push_back(relativeSigma(times));
  }
  const double sigma = median(sigmas);
  const double precision = 1.25 * sigma / std::sqrt(static_cast<double>(round));
  if (precision > kMedianPrecision && round < maxRounds_) return;  // two more rounds
  medians_ = std::move(table);
  const auto best = std::min_element(medians_.begin(), medians_.end());
  chosen_ = candidates_[static_cast<std::size_t>(best - medians_.begin())];
}

}  // namespace ddp::comm
