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
  if (o.suspendedSeconds > 0) line["suspended_s"] = o.suspendedSeconds;
  if (o.plannedSteps) line["planned_steps"] = *o.plannedSteps;
  if (o.endedBy == "signal") line["signal"] = signalName(o.signal);
  if (o.endedBy == "error") line["error"] = o.error;
  if (o.checkpoint) {
    line["checkpoint"] =
        o.checkpoint->empty() ? nlohmann::json(nullptr) : nlohmann::json(*o.checkpoint);
  }
  if (o.savedModel) line["model"] = *o.savedModel;
  // Each best key is null while no evaluation was the best, the file's too.
  const bool anyBest = o.best && o.best->step > 0;
  const auto ifBest = [&](const nlohmann::json& value) {
    return anyBest ? value : nlohmann::json(nullptr);
  };
  if (o.best) {
    line["best_metric"] = trainer::bestMetricName(o.best->metric);
    line["best_step"] = ifBest(o.best->step);
    line["best_test_loss"] = ifBest(o.best->testLoss);
    line["best_test_accuracy"] = ifBest(o.best->testAccuracy);
  }
  if (o.bestFile) line["best_file"] = ifBest(*o.bestFile);
  // A path or message need not be UTF-8, which JSON requires: such bytes
  // become U+FFFD instead of an exception at the run's end.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ddp::launcher
