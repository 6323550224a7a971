// How ddp_train shows a run: progress during an epoch, a summary per epoch,
// and the --metrics JSON-lines file. Rank 0 prints (every rank with
// --log-all-ranks, as plain lines); only rank 0 writes the metrics file.
//
// On a terminal, one live line redraws itself (step, loss, samples/s, ETA, and
// the mean step since the last line split into forward, backward, exposed
// communication and optimizer) at most ten times a second; otherwise (a log
// file, Slurm output) a plain line is printed every --log-every steps.
#pragma once

#include <chrono>
#include <fstream>
#include <string>

#include "trainer/trainer.h"

namespace ddp::launcher {

class ProgressPrinter final : public trainer::TrainObserver {
 public:
  // `metricsPath` empty: no metrics file. Opening it throws DataError.
  ProgressPrinter(int rank, std::size_t epochs, std::size_t logEvery,
                  const std::string& metricsPath);

  void onStep(const trainer::StepReport& report) override;
  void onEpoch(const trainer::EpochReport& report) override;

 private:
  bool enabled_;
  bool terminal_;
  std::size_t epochs_;
  std::size_t logEvery_;
  std::ofstream metrics_;
  std::string metricsPath_;
  std::chrono::steady_clock::time_point lastDraw_;
  bool lineOpen_ = false;
  trainer::PhaseTimes sinceLine_;  // summed over the steps since the last progress line
  std::size_t stepsSinceLine_ = 0;
};

}  // namespace ddp::launcher
