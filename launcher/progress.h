// How ddp_train shows a run: progress during an epoch, a summary per epoch,
// and the --metrics JSON-lines file. Rank 0 prints (every rank with
// --log-all-ranks, as plain lines); only rank 0 writes the metrics file.
//
// On a terminal, one live line redraws itself (step, loss, samples/s, ETA, and
// the mean step since the last line split into forward, backward, exposed
// communication and optimizer) at most ten times a second; otherwise (a log
// file, Slurm output) a plain line is printed every --log-every steps.
//
// Note [Finding a straggler]
// Every all-reduce waits for the last rank to arrive, so one slow rank (a
// slower or busier node, a throttled GPU, a noisy neighbour) sets the pace of
// the whole job, and on every other rank the loss shows up only as "comm".
// At each epoch's end the ranks exchange their mean compute per step (every
// phase but that wait: one allgather of a double), and rank 0 warns when the
// slowest took more than kStragglerRatio times the other ranks' median (and
// kStragglerMs more), naming the rank and its host. --metrics records every rank's figure
// (rank_compute_ms).
#pragma once

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "trainer/trainer.h"

namespace ddp::launcher {

// A straggler: the slowest rank computes this many times the others' median,
// and at least kStragglerMs more per step. Below a millisecond the ratio of
// two tiny steps on a busy node is noise (measured: 0.62 against 0.28 ms with
// four ranks on two cores and nothing slow).
constexpr double kStragglerRatio = 1.25;
constexpr double kStragglerMs = 1.0;

// The warning for the epoch's slowest rank (Note [Finding a straggler]), or
// nullopt when no rank is that much slower. `computeMs[r]` is rank r's mean
// compute per step, `hosts[r]` its host.
std::optional<std::string> stragglerWarning(std::size_t epoch, const std::vector<double>& computeMs,
                                            const std::vector<std::string>& hosts);

class ProgressPrinter final : public trainer::TrainObserver {
 public:
  // `metricsPath` empty: no metrics file. Opening it throws DataError.
  // `hosts[r]`: rank r's host, for naming a straggler.
  ProgressPrinter(int rank, std::size_t epochs, std::size_t logEvery,
                  const std::string& metricsPath, std::vector<std::string> hosts);

  void onStep(const trainer::StepReport& report) override;
  void onEpoch(const trainer::EpochReport& report) override;

 private:
  bool enabled_;
  bool terminal_;
  std::size_t epochs_;
  std::size_t logEvery_;
  std::ofstream metrics_;
  std::string metricsPath_;
  std::vector<std::string> hosts_;
  std::chrono::steady_clock::time_point lastDraw_;
  bool lineOpen_ = false;
  trainer::PhaseTimes sinceLine_;  // summed over the steps since the last progress line
  std::size_t stepsSinceLine_ = 0;
};

}  // namespace ddp::launcher
