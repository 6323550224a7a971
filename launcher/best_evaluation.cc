#include "launcher/best_evaluation.h"

#include <cmath>

#include "runtime/str.h"

namespace ddp::launcher {

BestEvaluation::BestEvaluation(const trainer::TrainPosition& resumedFrom)
    : bestLoss_(resumedFrom.bestTestLoss),
      bestStep_(resumedFrom.bestStep),
      sinceBest_(resumedFrom.evaluationsSinceBest) {}

bool BestEvaluation::observe(double testLoss, std::size_t step) {
  // A diverged run's NaN is no one's best.
  const bool best = !std::isnan(testLoss) && (bestStep_ == 0 || testLoss < bestLoss_);
  if (best) {
    bestLoss_ = testLoss;
    bestStep_ = step;
    sinceBest_ = 0;
  } else {
    ++sinceBest_;
  }
  return best;
}

void BestEvaluation::markIn(trainer::TrainPosition& position) const {
  position.bestTestLoss = bestLoss_;
  position.bestStep = bestStep_;
  position.evaluationsSinceBest = sinceBest_;
}

std::string BestEvaluation::savedText(const std::string& path) const {
  return str("saved the best weights so far (test_loss ", fixed(bestLoss_, 4), " after step ",
             bestStep_, ") to ", path, " (--save-best)");
}

std::string BestEvaluation::earlyStopText(std::size_t patience) const {
  const std::string best = bestStep_ > 0
                               ? str("the lowest, ", fixed(bestLoss_, 4), " after step ", bestStep_)
                               : std::string("none finite");
  return str("stopped early: ", sinceBest_, sinceBest_ == 1 ? " evaluation" : " evaluations",
             " in a row did not lower the test loss (", best, "; --early-stop ", patience, ")");
}

}  // namespace ddp::launcher
