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
// phase but that wait: one allgather, trainer::PaceReport), and rank 0 warns
// when the slowest took more than kStragglerRatio times the other ranks'
// median (and kStragglerMs more, over kStragglerMinSteps timed steps or
// more), naming the rank and its host. --metrics
// records every rank's figure (rank_compute_ms). An epoch can last hours (a
// large data set read once, as language models are), so the ranks also
// exchange their pace within an epoch, every --pace-check-every seconds of
// rank 0's clock: rank 0's verdict that a window is over rides on the
// all-reduce that already agrees on stop signals every few steps, so a step
// pays nothing more. A window's warning is printed only when the ranks it
// names differ from the previous window's: a lasting straggler is named
// once, not every few minutes.
//
// Note [Finding a contended CPU]
// Other processes on a rank's CPUs slow it down without any sign: mpirun
// binds every job's ranks from core 0 up, unaware of other jobs, so two jobs
// started side by side on one node share their first cores while the rest
// stay idle, and each runs at half speed (measured: 18.2 ms steps against
// 9.0 alone, on a 2-core node with one idle core). Every rank is slowed
// alike, so no straggler shows. The kernel counts, per thread, the time on
// a CPU and the time spent ready to run but waiting for one
// (/proc/thread-self/schedstat); a thread that sleeps or blocks adds to
// neither. Over each epoch's steps the training thread's share of its ready
// time is measured (alone: 0.96; np=2, one core each: 0.90-0.94; the two
// jobs above: 0.48) and gathered with the compute times. Rank 0 warns about
// ranks whose share fell below kContentionRatio times what their own job
// leaves them (runtime/cpu_share.h, expectedCpuShare: four ranks
// oversubscribing two cores expect 0.5 and measured 0.54-0.56), once a rank
// was ready for at least kContentionMinSeconds, naming each rank, its host
// and its share. Under a container's CPU quota (Note [CPU quotas] in
// runtime/cpu_quota.h) the expected share counts the quota too, and a rank
// whose quota ran out in kThrottledRatio of its periods over the stretch
// (cpu.stat, PaceReport::CpuTime::throttled) is named as short of quota:
// other processes under the same quota take its time, however free the
// node's cores are. --metrics records every rank's share (rank_cpu_share).
#pragma once

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/evaluate.h"
#include "launcher/run_end.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

// A straggler: the slowest rank computes this many times the others' median,
// and at least kStragglerMs more per step. Below a millisecond the ratio of
// two tiny steps on a busy node is noise (measured: 0.62 against 0.28 ms with
// four ranks on two cores and nothing slow).
constexpr double kStragglerRatio = 1.25;
constexpr double kStragglerMs = 1.0;
// Over fewer timed steps one scheduling hiccup decides: with nothing slow,
// 1 of 10 runs with one timed step would name a rank, none of 10 with 10
// (benchmarks/straggler_noise.sh, RESULTS.md "Straggler verdicts on short
// runs").
constexpr std::size_t kStragglerMinSteps = 10;

// "epoch 4" (`wholeEpoch`) or "steps 1201-1850 of epoch 1": what a pace
// report covers, to begin its warnings.
std::string paceSpan(const trainer::PaceReport& pace, bool wholeEpoch);

// The straggler (Note [Finding a straggler]): its rank, its mean compute per
// step and the other ranks' median, in ms; nullopt when no rank is that much
// slower. `computeMs[r]` is rank r's mean compute per step.
struct Straggler {
  std::size_t rank = 0;
  double computeMs = 0.0;
  double othersMedianMs = 0.0;
};
std::optional<Straggler> stragglerOf(const std::vector<double>& computeMs);
// The same for a pace report; none over fewer than kStragglerMinSteps timed steps.
std::optional<Straggler> stragglerIn(const trainer::PaceReport& pace);

// The warning naming `slow`'s rank and its host (`hosts[r]`), after `when`
// (paceSpan).
std::string stragglerWarning(const std::string& when, const Straggler& slow,
                             const std::vector<std::string>& hosts);

// A contended rank: its training thread ran less than this fraction of what
// its own job leaves it (Note [Finding a contended CPU]), over at least
// kContentionMinSeconds of time ready to run; shorter epochs are noise.
constexpr double kContentionRatio = 0.75;
constexpr double kContentionMinSeconds = 1.0;
// A contended rank whose cgroup's CPU quota ran out in at least this
// fraction of its periods (PaceReport::CpuTime::throttled) is named as
// short of quota, not of cores: its job's threads fit the quota (Note [CPU
// quotas] in runtime/cpu_quota.h), so other processes under the same quota
// take its time, and binding to other cores would not help. Measured: a
// busy loop under the same 1-CPU quota as one rank, 49% of its ready time
// on a CPU and the quota out in about half the periods.
constexpr double kThrottledRatio = 0.25;

// The share of its ready time a rank's training thread ran; nullopt without
// kContentionMinSeconds of figures.
std::optional<double> cpuShareOf(const trainer::PaceReport::CpuTime& cpu);

// The contended ranks (Note [Finding a contended CPU]), in rank order.
std::vector<std::size_t> contendedRanks(const std::vector<trainer::PaceReport::CpuTime>& cpu);

// The warning naming contendedRanks' ranks, their hosts and their shares,
// after `when` (paceSpan), or nullopt. `cpu[r]` and `hosts[r]` are rank r's.
std::optional<std::string> contentionWarning(const std::string& when,
                                             const std::vector<trainer::PaceReport::CpuTime>& cpu,
                                             const std::vector<std::string>& hosts);

// The warning for an evaluation whose test loss is not finite, or nullopt;
// `whose` names it: "after epoch 3", "after step 500", "of model.safetensors". Training stops at
// the first step whose loss is not finite, but the weights of a run's last update are only ever
// seen by its last evaluation: without a word, a run whose last updates diverged would end as if it
// had succeeded, with "nan" in a column.
std::optional<std::string> nonFiniteTestWarning(const std::string& whose,
                                                const trainer::EvalResult& test);

class ProgressPrinter final : public trainer::TrainObserver {
 public:
  // `metricsPath` empty: no metrics file. Opening it throws DataError.
  // `metricsEvery` > 0: a --metrics line after every metricsEvery-th step
  // of the run too (--metrics-every). `hosts[r]`: rank r's host, for naming
  // a straggler.
  ProgressPrinter(int rank, std::size_t epochs, std::size_t logEvery,
                  const std::string& metricsPath, std::size_t metricsEvery,
                  std::vector<std::string> hosts);

  void onStep(const trainer::StepReport& report) override;
  void onEpoch(const trainer::EpochReport& report) override;
  void onPace(const trainer::PaceReport& report) override;
  // --eval-every: "epoch 2/5  step 31/469  test_loss 0.5123  test_acc
  // 81.20%  (after step 500 of the run, evaluated in 0.05 s)", and a
  // --metrics line with global_step.
  void onStepEvaluation(const trainer::StepEvaluation& report) override;
  // --evaluate's result (launcher/evaluate.h): its line, and its --metrics line.
  void onEvaluation(const EvaluationReport& report);
  // A training run's end: its last --metrics line (Note [The run's last
  // --metrics line] in launcher/run_end.h); no line is written after it.
  // Rank 0, on any thread (Note [One end line, from any thread] in
  // launcher/run_end_recorder.h): the main thread once the run's writes are
  // done or in its failure's handler, or the thread ending the job.
  void onRunEnd(const RunOutcome& outcome);
  // The global step of the last onStep report (0: none): where a failed run
  // got to. Any thread.
  std::size_t lastReportedStep() const { return lastReportedStep_; }

 private:
  // Ends the live terminal line, if one is drawn, before a warning.
  void endLiveLine();
  // Starts the sums a progress line averages over afresh.
  void resetSinceLine();
  // Appends one JSON line to --metrics, if open and not ended; on a failed
  // write warns once that `lost` (and what follows) is not recorded, and
  // closes it. `ends`: the end line, after which nothing is written.
  void writeMetrics(const std::string& line, const std::string& lost, bool ends = false);
  // Whether a line written now would be kept (open, not ended).
  bool writesMetrics();
  // --metrics-every: adds the step to the next step line, and writes it
  // after every metricsEvery_-th step of the run.
  void addToStepMetrics(const trainer::StepReport& report);

  bool enabled_;
  bool terminal_;
  std::size_t epochs_;
  std::size_t logEvery_;
  // The file, written by the main thread, and the end line by whichever
  // thread ends the run (onRunEnd).
  std::mutex metricsMutex_;
  std::ofstream metrics_;
  bool metricsEnded_ = false;
  std::string metricsPath_;
  std::size_t metricsEvery_;
  // Summed over the steps since the last --metrics-every line.
  struct {
    trainer::PhaseTimes times;
    std::size_t steps = 0, clipped = 0, skipped = 0;
    double gradNormSum = 0.0, gradNormMax = 0.0;
    std::size_t gradNorms = 0;
  } sinceMetrics_;
  std::vector<std::string> hosts_;
  std::atomic<std::size_t> lastReportedStep_{0};
  std::chrono::steady_clock::time_point lastDraw_;
  bool lineOpen_ = false;
  trainer::PhaseTimes sinceLine_;  // summed over the steps since the last progress line
  std::size_t stepsSinceLine_ = 0;
  std::size_t clippedSinceLine_ = 0;  // steps whose gradient was clipped
  double lossSinceLine_ = 0.0;        // rank 0's batch losses, summed
  // What the previous window within an epoch found (onPace).
  std::optional<std::size_t> windowStraggler_;
  std::vector<std::size_t> windowContended_;
};

}  // namespace ddp::launcher
