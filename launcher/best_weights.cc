#include "launcher/best_weights.h"

#include <cmath>
#include <utility>

#include "runtime/str.h"

namespace ddp::launcher {

BestWeights::BestWeights(std::string path, const trainer::TrainPosition& resumedFrom)
    : path_(std::move(path)),
      bestLoss_(resumedFrom.bestTestLoss),
      bestStep_(resumedFrom.bestStep) {}

bool BestWeights::isBest(double testLoss) const {
  if (std::isnan(testLoss)) return false;  // a diverged run's weights are no one's best
  return bestStep_ == 0 || testLoss < bestLoss_;
}

void BestWeights::record(double testLoss, std::size_t step) {
  bestLoss_ = testLoss;
  bestStep_ = step;
}

void BestWeights::markIn(trainer::TrainPosition& position) const {
  position.bestTestLoss = bestLoss_;
  position.bestStep = bestStep_;
}

std::string BestWeights::savedText() const {
  return str("saved the best weights so far (test_loss ", fixed(bestLoss_, 4), " after step ",
             bestStep_, ") to ", path_, " (--save-best)");
}

}  // namespace ddp::launcher
