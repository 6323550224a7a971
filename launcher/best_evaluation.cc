#include "launcher/best_evaluation.h"

#include <cmath>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/safetensors.h"

namespace ddp::launcher {
namespace {

// What --save-best's files record as their writer (ddp.saved_by).
constexpr const char* kSaveBest = "--save-best";

bool higherIsBetter(trainer::BestMetric metric) {
  return metric == trainer::BestMetric::kTestAccuracy;
}

}  // namespace

BestEvaluation::BestEvaluation(trainer::BestMetric metric, double minDelta,
                               const trainer::BestRecord& resumed)
    : minDelta_(minDelta), record_(resumed) {
  DDP_CHECK(minDelta >= 0, "a negative --early-stop-min-delta got past the options");
  const bool recorded = resumed.step > 0 || resumed.evaluationsSince > 0;
  if (recorded && resumed.metric == metric) {
    // A checkpoint from before the reference was recorded: with no minimum
    // delta, which was all there was, the reference is the best.
    if (record_.referenceStep == 0 && record_.step > 0) {
      record_.referenceStep = record_.step;
      record_.referenceValue = bestValue();
    }
    return;
  }
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

bool BestEvaluation::beats(double v, double than, double margin) const {
  return higherIsBetter(record_.metric) ? v > than + margin : v < than - margin;
}

bool BestEvaluation::observe(const trainer::EvalResult& result, std::size_t step) {
  const double v = value(result);
  // A diverged run's NaN is no one's best, nor an improvement.
  if (std::isnan(v)) {
    ++record_.evaluationsSince;
    return false;
  }
  const bool best = record_.step == 0 || beats(v, bestValue(), 0.0);
  if (best) {
    record_.step = step;
    record_.testLoss = result.loss;
    record_.testAccuracy = result.accuracy;
    record_.testSamples = result.samples;
  }
  // Note [How much better counts for --early-stop]
  if (record_.referenceStep == 0 || beats(v, record_.referenceValue, minDelta_)) {
    record_.referenceStep = step;
    record_.referenceValue = v;
    record_.evaluationsSince = 0;
  } else {
    ++record_.evaluationsSince;
  }
  return best;
}

trainer::ModelOrigin BestEvaluation::origin() const {
  trainer::ModelOrigin origin;
  origin.step = record_.step;
  origin.savedBy = kSaveBest;
  origin.chosenBy = record_.metric;
  // A checkpoint from before the samples were recorded leaves the figures out.
  if (record_.testSamples > 0) {
    origin.evaluation =
        trainer::EvalResult{record_.testLoss, record_.testAccuracy, record_.testSamples};
  }
  return origin;
}

std::string BestEvaluation::bestText() const {
  return str(trainer::bestMetricName(record_.metric), " ", fixedOrExponent(bestValue(), 4),
             " after step ", record_.step);
}

std::string BestEvaluation::savedText(const std::string& path) const {
  return str("saved the best weights so far (", bestText(), ") to ", path, " (--save-best)");
}

std::string BestEvaluation::earlyStopText(std::size_t patience) const {
  const bool higher = higherIsBetter(record_.metric);
  const std::string best = record_.step > 0
                               ? str(higher ? "the highest, " : "the lowest, ",
                                     fixedOrExponent(bestValue(), 4), " after step ", record_.step)
                               : std::string("none finite");
  const std::size_t since = record_.evaluationsSince;
  const std::string evaluations =
      str(since, since == 1 ? " evaluation" : " evaluations", " in a row did ",
          higher ? "not raise the test accuracy" : "not lower the test loss");
  if (minDelta_ == 0) {
    return str("stopped early: ", evaluations, " (", best, "; --early-stop ", patience, ")");
  }
  // Note [How much better counts for --early-stop]: named when it is not
  // the best, which smaller gains moved on since.
  const std::string from =
      record_.referenceStep > 0 && record_.referenceStep != record_.step
          ? str(higher ? " above " : " below ", fixedOrExponent(record_.referenceValue, 4),
                " (after step ", record_.referenceStep, "; ")
          : std::string(" (");
  return str("stopped early: ", evaluations, " by more than ", minDelta_, from, best,
             "; --early-stop ", patience, ", --early-stop-min-delta ", minDelta_, ")");
}

std::optional<BestFileNotice> restoreBestFile(const std::string& path, const BestEvaluation& best,
                                              const std::string& checkpointDir,
                                              trainer::Sequential& model) {
  const std::size_t step = best.record().step;
  if (step == 0) return std::nullopt;
  std::string why;
  if (!std::filesystem::exists(path)) {
    why = "is not there";
  } else {
    try {
      const trainer::SafetensorsFile file = trainer::loadSafetensors(path);
      const std::optional<trainer::ModelOrigin> origin =
          trainer::recordedOrigin(path, file.metadata);
      if (origin && origin->step == step && origin->savedBy == kSaveBest) return std::nullopt;
      why =
          origin && origin->step
              ? str("holds the weights of step ", *origin->step,
                    origin->savedBy == kSaveBest ? std::string() : str(" (", origin->savedBy, ")"))
              : std::string("records no step of a --save-best write");
    } catch (const DataError& e) {
      why = str("cannot be read (", e.what(), ")");
    }
  }
  const std::string recorded =
      str("the best weights the checkpoint records (", best.bestText(), ")");
  const std::string checkpoint = trainer::checkpointPath(checkpointDir, step);
  if (!std::filesystem::exists(checkpoint)) {
    return BestFileNotice{
        true, str("--save-best ", path, ": ", why, ", and ", recorded, " are in no checkpoint in ",
                  checkpointDir, " (none was written at step ", step,
                  ", or --keep-checkpoints deleted it): ", path,
                  " is written again only at an evaluation better than that")};
  }
  const trainer::SafetensorsFile file = trainer::loadSafetensors(checkpoint);
  trainer::saveModelTensors(path, trainer::checkpointWeights(checkpoint, file, model),
                            trainer::originMetadata(best.origin()));
  return BestFileNotice{false, str("--save-best ", path, ": ", why, "; wrote ", recorded,
                                   " to it again, from ", checkpoint)};
}

}  // namespace ddp::launcher
