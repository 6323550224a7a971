#include "launcher/best_evaluation.h"

#include <cmath>

#include "runtime/str.h"

namespace ddp::launcher {
namespace {

bool higherIsBetter(trainer::BestMetric metric) {
  return metric == trainer::BestMetric::kTestAccuracy;
}

}  // namespace

BestEvaluation::BestEvaluation(trainer::BestMetric metric, const trainer::BestRecord& resumed)
    : record_(resumed) {
  const bool recorded = resumed.step > 0 || resumed.evaluationsSince > 0;
  if (recorded && resumed.metric == metric) return;
  if (resumed.step > 0) {
    resumeNotice_ =
        str("--best-metric ", trainer::bestMetricName(metric),
            ": the checkpoint's best evaluation (after step ", resumed.step, ") was judged by ",
            trainer::bestMetricName(resumed.metric),
            ", so the run starts a new record (--save-best's file is replaced at the next "
            "evaluation, --early-stop counts from it)");
  }
  record_ = trainer::BestRecord{};
  record_.metric = metric;
}

double BestEvaluation::value(const trainer::EvalResult& result) const {
  return higherIsBetter(record_.metric) ? result.accuracy : result.loss;
}

double BestEvaluation::bestValue() const {
  return higherIsBetter(record_.metric) ? record_.testAccuracy : record_.testLoss;
}

bool BestEvaluation::observe(const trainer::EvalResult& result, std::size_t step) {
  const double v = value(result);
  // A diverged run's NaN is no one's best.
  const bool best =
      !std::isnan(v) &&
      (record_.step == 0 || (higherIsBetter(record_.metric) ? v > bestValue() : v < bestValue()));
  if (best) {
    record_.step = step;
    record_.testLoss = result.loss;
    record_.testAccuracy = result.accuracy;
    record_.evaluationsSince = 0;
    bestSamples_ = result.samples;
  } else {
    ++record_.evaluationsSince;
  }
  return best;
}

trainer::ModelOrigin BestEvaluation::origin() const {
  trainer::ModelOrigin origin;
  origin.step = record_.step;
  origin.savedBy = "--save-best";
  origin.chosenBy = record_.metric;
  origin.evaluation = trainer::EvalResult{record_.testLoss, record_.testAccuracy, bestSamples_};
  return origin;
}

std::string BestEvaluation::savedText(const std::string& path) const {
  return str("saved the best weights so far (", trainer::bestMetricName(record_.metric), " ",
             fixed(bestValue(), 4), " after step ", record_.step, ") to ", path, " (--save-best)");
}

std::string BestEvaluation::earlyStopText(std::size_t patience) const {
  const bool higher = higherIsBetter(record_.metric);
  const std::string best = record_.step > 0
                               ? str(higher ? "the highest, " : "the lowest, ",
                                     fixed(bestValue(), 4), " after step ", record_.step)
                               : std::string("none finite");
  const std::size_t since = record_.evaluationsSince;
  return str("stopped early: ", since, since == 1 ? " evaluation" : " evaluations",
             " in a row did ",
             higher ? "not raise the test accuracy (" : "not lower the test loss (", best,
             "; --early-stop ", patience, ")");
}

}  // namespace ddp::launcher
