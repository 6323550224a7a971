#include "launcher/evaluate.h"

#include <nlohmann/json.hpp>

#include "launcher/resume.h"
#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::launcher {

std::string weightsToEvaluate(const Options& o) {
  // Note [Resuming or starting from --init-from] in launcher/resume.h.
  if (std::string checkpoint = checkpointToResume(o); !checkpoint.empty()) return checkpoint;
  if (!o.initFrom.empty()) return o.initFrom;
  throw DataError(str("--evaluate --resume: no complete checkpoint in --checkpoint-dir ",
                      o.checkpointDir, " to evaluate"));
}

std::optional<std::size_t> EvaluationReport::weightsStep() const {
  if (checkpointStep) return checkpointStep;
  return origin ? origin->step : std::nullopt;
}

std::string evaluationText(const EvaluationReport& r) {
  const std::optional<std::size_t> step = r.weightsStep();
  return str("evaluated ", r.file, step ? str(" (the weights of step ", *step, ")") : std::string(),
             ": test_loss ", fixedOrExponent(r.result.loss, 4), "  test_acc ",
             fixed(100.0 * r.result.accuracy, 2), "%  (", r.testSet, ": ", r.result.samples,
             " samples over ", r.ranks, r.ranks == 1 ? " rank, " : " ranks, ", fixed(r.seconds, 2),
             " s)");
}

std::string evaluationMetrics(const EvaluationReport& r) {
  nlohmann::json line = {{"evaluated", r.file},
                         {"checkpoint_step", nullptr},
                         {"weights_step", nullptr},
                         {"test_loss", r.result.loss},
                         {"test_accuracy", r.result.accuracy},
                         {"test_samples", r.result.samples},
                         {"ranks", r.ranks},
                         {"wall_time_s", r.seconds}};
  if (r.checkpointStep) line["checkpoint_step"] = *r.checkpointStep;
  if (const auto step = r.weightsStep()) line["weights_step"] = *step;
  // A file name need not be UTF-8, which JSON requires: such bytes become
  // U+FFFD instead of an exception after the evaluation.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ddp::launcher
