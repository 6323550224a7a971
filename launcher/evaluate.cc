#include "launcher/evaluate.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/checkpoint.h"

namespace ddp::launcher {

std::string weightsToEvaluate(const Options& o) {
  if (o.resume.empty()) return o.initFrom;
  if (o.resume != "latest") {
    if (std::filesystem::is_directory(o.resume)) {
      throw DataError(str("--evaluate --resume ", o.resume,
                          ": is a directory; to evaluate the newest checkpoint in it, give "
                          "--checkpoint-dir ",
                          o.resume, " --resume (without a FILE)"));
    }
    return o.resume;
  }
  // Note [Resuming or starting from --init-from] in launcher/resume.h.
  const std::vector<std::string> all = trainer::completeCheckpoints(o.checkpointDir);
  if (!all.empty()) return all.back();
  if (!o.initFrom.empty()) return o.initFrom;
  throw DataError(str("--evaluate --resume: no complete checkpoint in --checkpoint-dir ",
                      o.checkpointDir, " to evaluate"));
}

std::string evaluationText(const EvaluationReport& r) {
  return str(
      "evaluated ", r.file,
      r.checkpointStep ? str(" (the weights of step ", *r.checkpointStep, ")") : std::string(),
      ": test_loss ", fixed(r.result.loss, 4), "  test_acc ", fixed(100.0 * r.result.accuracy, 2),
      "%  (", r.testSet, ": ", r.result.samples, " samples over ", r.ranks,
      r.ranks == 1 ? " rank, " : " ranks, ", fixed(r.seconds, 2), " s)");
}

std::string evaluationMetrics(const EvaluationReport& r) {
  nlohmann::json line = {{"evaluated", r.file},
                         {"checkpoint_step", nullptr},
                         {"test_loss", r.result.loss},
                         {"test_accuracy", r.result.accuracy},
                         {"test_samples", r.result.samples},
                         {"ranks", r.ranks},
                         {"wall_time_s", r.seconds}};
  if (r.checkpointStep) line["checkpoint_step"] = *r.checkpointStep;
  return line.dump();
}

}  // namespace ddp::launcher
