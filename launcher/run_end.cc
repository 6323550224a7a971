#include "launcher/run_end.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/str.h"

namespace ddp::launcher {

const char* endedByName(trainer::RunEnd end) {
  switch (end) {
    case trainer::RunEnd::kEpochs:
      return "epochs";
    case trainer::RunEnd::kMaxSteps:
      return "max_steps";
    case trainer::RunEnd::kEarlyStop:
      return "early_stop";
    case trainer::RunEnd::kSignal:
      return "signal";
    case trainer::RunEnd::kTimeLimit:
      return "time_limit";
  }
  return "epochs";
}

std::string signalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);  // glibc: "TERM", null for none
  return abbreviation != nullptr ? str("SIG", abbreviation) : str("signal ", signal);
}

std::string runEndMetrics(const RunOutcome& o) {
  nlohmann::json line = {{"ended_by", o.endedBy},
                         {"exit_code", o.exitCode},
                         {"last_step", o.globalStep},
                         {"run_time_s", o.wallSeconds}};
  if (o.plannedSteps) line["planned_steps"] = *o.plannedSteps;
  if (o.endedBy == "signal") line["signal"] = signalName(o.signal);
  if (o.endedBy == "error") line["error"] = o.error;
  if (o.checkpoint) {
    line["checkpoint"] =
        o.checkpoint->empty() ? nlohmann::json(nullptr) : nlohmann::json(*o.checkpoint);
  }
  if (o.savedModel) line["model"] = *o.savedModel;
  if (o.best) {
    const trainer::BestRecord& b = *o.best;
    const bool any = b.step > 0;
    line["best_metric"] = trainer::bestMetricName(b.metric);
    line["best_step"] = any ? nlohmann::json(b.step) : nlohmann::json(nullptr);
    line["best_test_loss"] = any ? nlohmann::json(b.testLoss) : nlohmann::json(nullptr);
    line["best_test_accuracy"] = any ? nlohmann::json(b.testAccuracy) : nlohmann::json(nullptr);
  }
  if (o.bestFile) {  // what it holds is the best's, so not without one
    line["best_file"] =
        o.best && o.best->step > 0 ? nlohmann::json(*o.bestFile) : nlohmann::json(nullptr);
  }
  // A path or message need not be UTF-8, which JSON requires: such bytes
  // become U+FFFD instead of an exception at the run's end.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ddp::launcher
