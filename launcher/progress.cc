#include "launcher/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/log.h"

namespace ddp::launcher {
namespace {

std::string duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s < 60) return str(s, "s");
  if (s < 3600) return str(s / 60, "m", (s % 60 < 10 ? "0" : ""), s % 60, "s");
  return str(s / 3600, "h", (s % 3600) / 60 < 10 ? "0" : "", (s % 3600) / 60, "m");
}

// Whether a person watches stdout. Under mpirun, every rank's stdout is a pty
// that mpirun forwards to wherever its own stdout goes (a terminal, a pipe,
// a file), so isatty() alone would say yes even in `mpirun ... > log`; ask
// about mpirun's stdout instead (it is our parent on its own node).
bool stdoutIsTerminal() {
  if (isatty(STDOUT_FILENO) == 0) return false;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return true;
  char target[256] = {};
  const std::string link = str("/proc/", getppid(), "/fd/1");
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string where(target, static_cast<std::size_t>(n));
  return where.rfind("/dev/pts/", 0) == 0 || where.rfind("/dev/tty", 0) == 0;
}

// Each rank's share for --metrics: null where too short to measure.
nlohmann::json cpuShares(const std::vector<trainer::PaceReport::CpuTime>& cpu) {
  nlohmann::json shares = nlohmann::json::array();
  for (const auto& rank : cpu) {
    const auto share = cpuShareOf(rank);
    shares.push_back(share ? nlohmann::json(*share) : nlohmann::json(nullptr));
  }
  return shares;
}

// Each rank's throttled fraction for --metrics: null without a CPU quota.
nlohmann::json quotaThrottled(const std::vector<trainer::PaceReport::CpuTime>& cpu) {
  nlohmann::json fractions = nlohmann::json::array();
  for (const auto& rank : cpu)
    fractions.push_back(rank.throttled >= 0 ? nlohmann::json(rank.throttled)
                                            : nlohmann::json(nullptr));
  return fractions;
}

}  // namespace

std::string paceSpan(const trainer::PaceReport& pace, bool wholeEpoch) {
  return wholeEpoch ? str("epoch ", pace.epoch)
                    : str("steps ", pace.firstStep, "-", pace.lastStep, " of epoch ", pace.epoch);
}

std::optional<Straggler> stragglerOf(const std::vector<double>& computeMs) {
  if (computeMs.size() < 2) return std::nullopt;
  // A rank stopped in the stretch sent NaN (gatherPace): no verdict.
  if (std::any_of(computeMs.begin(), computeMs.end(), [](double ms) { return std::isnan(ms); }))
    return std::nullopt;
  const auto slowest = std::max_element(computeMs.begin(), computeMs.end());
  // The others' median: at np=2 the other rank, not a mean the straggler is half of.
  std::vector<double> others = computeMs;
  others.erase(others.begin() + (slowest - computeMs.begin()));
  std::sort(others.begin(), others.end());
  const std::size_t n = others.size();
  const double median = n % 2 == 1 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
  if (!(*slowest > kStragglerRatio * median && *slowest - median >= kStragglerMs)) {
    return std::nullopt;
  }
  return Straggler{static_cast<std::size_t>(slowest - computeMs.begin()), *slowest, median};
}

std::optional<Straggler> stragglerIn(const trainer::PaceReport& pace) {
  if (pace.timedSteps < kStragglerMinSteps) return std::nullopt;
  return stragglerOf(pace.rankComputeMs);
}

std::string stragglerWarning(const std::string& when, const Straggler& slow,
                             const std::vector<std::string>& hosts) {
  return str(when, ": rank ", slow.rank,
             slow.rank < hosts.size() ? str(" (", hosts[slow.rank], ")") : std::string(), " took ",
             fixed(slow.computeMs / slow.othersMedianMs, 2),
             "x the other ranks' median compute per step (", fixed(slow.computeMs, 2),
             " ms against ", fixed(slow.othersMedianMs, 2),
             " ms: data, forward, backward and optimizer); every all-reduce waits for it, so "
             "the job runs at its pace");
}

std::optional<double> cpuShareOf(const trainer::PaceReport::CpuTime& cpu) {
  const double ready = cpu.running + cpu.waiting;
  if (!(ready >= kContentionMinSeconds)) return std::nullopt;
  return cpu.running / ready;
}

std::vector<std::size_t> contendedRanks(const std::vector<trainer::PaceReport::CpuTime>& cpu) {
  std::vector<std::size_t> ranks;
  for (std::size_t r = 0; r < cpu.size(); ++r) {
    const auto share = cpuShareOf(cpu[r]);
    if (share && *share < kContentionRatio * cpu[r].expectedShare) ranks.push_back(r);
  }
  return ranks;
}

std::optional<std::string> contentionWarning(const std::string& when,
                                             const std::vector<trainer::PaceReport::CpuTime>& cpu,
                                             const std::vector<std::string>& hosts) {
  const std::vector<std::size_t> contended = contendedRanks(cpu);
  if (contended.empty()) return std::nullopt;
  std::string ranks;
  bool allThrottled = true;
  for (const std::size_t r : contended) {
    const bool throttled = cpu[r].throttled >= kThrottledRatio;
    allThrottled = allThrottled && throttled;
    ranks += str(ranks.empty() ? "" : ", ", r, " (", r < hosts.size() ? hosts[r] + ": " : "",
                 "on a CPU ", fixed(*cpuShareOf(cpu[r]) * 100, 0),
                 "% of the time it was ready to run, where its own job's threads leave it ",
                 fixed(cpu[r].expectedShare * 100, 0), "%",
                 throttled ? str("; its cgroup's CPU quota ran out in ",
                                 fixed(cpu[r].throttled * 100, 0), "% of the periods")
                           : std::string(),
                 ")");
  }
  const char* plural = contended.size() == 1 ? " " : "s ";
  if (allThrottled) {  // kThrottledRatio
    return str(when, ": other processes under the same CPU quota take the CPU time of rank", plural,
               ranks,
               ". The kernel stops every thread under a quota once it runs out, until the next "
               "period, and this job's own threads fit it: move the other processes out of its "
               "cgroup, or raise the quota (docker run --cpus, a pod's limits.cpu)");
  }
  return str(when, ": other processes compete for the CPUs of rank", plural, ranks,
             ". Another job bound to the same cores? mpirun binds each job's ranks from core 0 up, "
             "unaware of other jobs: give each job its own cores (mpirun --cpu-set, taskset -c) "
             "or launch with --bind-to none");
}

ProgressPrinter::ProgressPrinter(int rank, std::size_t epochs, std::size_t logEvery,
                                 const std::string& metricsPath, std::size_t metricsEvery,
                                 std::vector<std::string> hosts)
    : enabled_(log::printsInfo()),
      terminal_(rank == 0 && stdoutIsTerminal()),
      epochs_(epochs),
      logEvery_(logEvery),
      metricsPath_(metricsPath),
      metricsEvery_(metricsEvery),
      hosts_(std::move(hosts)) {
  if (rank == 0 && !metricsPath.empty()) {
    metrics_.open(metricsPath, std::ios::app);
    if (!metrics_)
      throw DataError(
          str("--metrics: cannot open '", metricsPath, "' (", std::strerror(errno), ")"));
  }
}

void ProgressPrinter::endLiveLine() {
  if (lineOpen_) log::raw("\n");  // a warning goes below the live line, which stays
  lineOpen_ = false;
}

void ProgressPrinter::onStep(const trainer::StepReport& r) {
  lastReportedStep_ = r.globalStep;
  if (!enabled_) return;
  if (!r.skippedFor.empty()) {
    endLiveLine();
    log::warn(str("step ", r.globalStep, ": the gradient of ", r.skippedFor,
                  " holds a NaN or infinity after the all-reduce: update skipped on every rank "
                  "(--skip-nonfinite)"));
  }
  if (metricsEvery_ > 0 && writesMetrics()) addToStepMetrics(r);
  sinceLine_ += r.times;
  ++stepsSinceLine_;
  clippedSinceLine_ += r.clipped ? 1 : 0;
  lossSinceLine_ += r.loss;
  // Decide first, format only what is printed: this runs every step, on the
  // rank the others wait for in the next all-reduce.
  const bool last = r.stepsLeft == 0;
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - lastDraw_ < std::chrono::milliseconds(100)) return;
    lastDraw_ = now;
  } else if (r.stepInEpoch % logEvery_ != 0) {
    return;
  }
  // The mean loss and step since the previous line (as Megatron-Core and
  // Hugging Face log the loss over the logging interval): one batch's loss
  // swings with the batch, a smaller one at more ranks.
  const double n = static_cast<double>(stepsSinceLine_);
  auto ms = [n](double seconds) { return fixed(seconds / n * 1e3, 2); };
  const trainer::PhaseTimes& t = sinceLine_;
  const std::string line =
      str("epoch ", r.epoch, "/", epochs_, "  step ", r.stepInEpoch, "/", r.stepsInEpoch, "  loss ",
          fixedOrExponent(lossSinceLine_ / n, 4), "  lr ", significant(r.learningRate, 3),
          r.gradNorm ? str("  grad-norm ", significant(*r.gradNorm, 3),
                           clippedSinceLine_ > 0 ? str(" (", clippedSinceLine_, " clipped)") : "")
                     : std::string(),
          "  ", fixed(r.samplesPerSecond, 0), " samples/s  ETA ", duration(r.secondsLeft),
          "  | step ", ms(t.total()), " ms: fwd ", ms(t.forward), " bwd ", ms(t.backward), " comm ",
          ms(t.comm), " opt ", ms(t.optimizer));
  resetSinceLine();
  if (terminal_) {
    log::redraw(line);
    lineOpen_ = true;
  } else {
    log::progress(line);
  }
}

void ProgressPrinter::resetSinceLine() {
  sinceLine_ = {};
  stepsSinceLine_ = 0;
  clippedSinceLine_ = 0;
  lossSinceLine_ = 0.0;
}

std::optional<std::string> nonFiniteTestWarning(const std::string& whose,
                                                const trainer::EvalResult& test) {
  if (test.samples == 0 || std::isfinite(test.loss)) return std::nullopt;
  return str("the test loss ", whose, " is ", fixedOrExponent(test.loss, 4),
             ": the model's outputs on the test set are not finite, as after updates that "
             "diverged (a lower --lr, --warmup-steps or --clip-grad-norm may help)");
}

void ProgressPrinter::onEpoch(const trainer::EpochReport& r) {
  if (!enabled_) return;
  resetSinceLine();  // an epoch's first progress line covers its own steps
  if (lineOpen_) {
    log::raw("\r\033[K");
    lineOpen_ = false;
  }
  log::info(str("epoch ", r.epoch, "/", epochs_, "  train_loss ", fixedOrExponent(r.trainLoss, 4),
                "  test_loss ", fixedOrExponent(r.test.loss, 4), "  test_acc ",
                fixed(100.0 * r.test.accuracy, 2), "%  ", fixed(r.samplesPerSecond, 0),
                " samples/s  time ", fixed(r.wallSeconds, 1), "s",
                r.steps < r.stepsInEpoch
                    ? str("  (stopped by ", r.stoppedEarly ? "--early-stop" : "--max-steps",
                          " after step ", r.steps, " of ", r.stepsInEpoch, ")")
                    : std::string(),
                r.skippedSteps > 0
                    ? str("  (", r.skippedSteps, r.skippedSteps == 1 ? " update" : " updates",
                          " skipped: not finite)")
                    : std::string(),
                r.gradNorms ? str("  grad-norm mean ", significant(r.gradNorms->mean(), 3), " max ",
                                  significant(r.gradNorms->max, 3),
                                  r.gradNorms->clipping ? str(" (", r.gradNorms->clipped, " of ",
                                                              r.gradNorms->steps, " steps clipped)")
                                                        : std::string())
                            : std::string()));
  const trainer::PhaseTimes& t = r.meanStep;
  auto ms = [](double seconds) { return fixed(seconds * 1e3, 2); };
  log::info(str("  mean step ", ms(t.total()), " ms: data ", ms(t.data), "  forward ",
                ms(t.forward), "  backward ", ms(t.backward), "  comm ", ms(t.comm), "  optimizer ",
                ms(t.optimizer)));
  if (const auto warning = nonFiniteTestWarning(str("after epoch ", r.epoch), r.test)) {
    log::warn(*warning);
  }
  const std::string when = paceSpan(r.pace, true);
  if (const auto slow = stragglerIn(r.pace)) log::warn(stragglerWarning(when, *slow, hosts_));
  if (const auto warning = contentionWarning(when, r.pace.rankCpu, hosts_)) log::warn(*warning);
  if (writesMetrics()) {
    nlohmann::json line = {{"epoch", r.epoch},
                           {"steps", r.steps},
                           {"steps_in_epoch", r.stepsInEpoch},
                           {"train_loss", r.trainLoss},
                           {"lr", r.learningRate},
                           {"test_loss", r.test.loss},
                           {"test_accuracy", r.test.accuracy},
                           {"test_samples", r.test.samples},
                           {"samples_per_s", r.samplesPerSecond},
                           {"train_time_s", r.trainSeconds},
                           {"wall_time_s", r.wallSeconds},
                           {"skipped_steps", r.skippedSteps},
                           {"rank_compute_ms", r.pace.rankComputeMs},
                           {"rank_cpu_share", cpuShares(r.pace.rankCpu)},
                           {"rank_quota_throttled", quotaThrottled(r.pace.rankCpu)},
                           {"step_ms",
                            {{"total", t.total() * 1e3},
                             {"data", t.data * 1e3},
                             {"forward", t.forward * 1e3},
                             {"backward", t.backward * 1e3},
                             {"comm", t.comm * 1e3},
                             {"optimizer", t.optimizer * 1e3}}}};
    if (r.gradNorms) {
      line["grad_norm_mean"] = r.gradNorms->mean();
      line["grad_norm_max"] = r.gradNorms->max;
      if (r.gradNorms->clipping) line["clipped_steps"] = r.gradNorms->clipped;
    }
    if (r.best) line["best"] = *r.best;
    writeMetrics(line.dump(), str("epoch ", r.epoch, " and later are"));
  }
}

bool ProgressPrinter::writesMetrics() {
  const std::lock_guard lock(metricsMutex_);
  return metrics_.is_open() && !metricsEnded_;
}

void ProgressPrinter::writeMetrics(const std::string& line, const std::string& lost, bool ends) {
  const std::lock_guard lock(metricsMutex_);
  if (!metrics_.is_open() || metricsEnded_) return;
  metricsEnded_ = ends;
  metrics_ << line << '\n';
  metrics_.flush();
  if (!metrics_) {  // a full disk: say so once, not at every epoch
    log::warn(str("--metrics: cannot write to ", metricsPath_, " (", std::strerror(errno),
                  "): ", lost, " not recorded"));
    metrics_.close();
  }
}

void ProgressPrinter::addToStepMetrics(const trainer::StepReport& r) {
  auto& since = sinceMetrics_;
  since.times += r.times;
  ++since.steps;
  since.clipped += r.clipped ? 1 : 0;
  since.skipped += r.skippedFor.empty() ? 0 : 1;
  if (r.gradNorm) {
    since.gradNormSum += *r.gradNorm;
    since.gradNormMax = std::max(since.gradNormMax, static_cast<double>(*r.gradNorm));
    ++since.gradNorms;
  }
  if (r.globalStep % metricsEvery_ != 0) return;
  DDP_CHECK(r.windowLoss.has_value(), "a --metrics-every step without the ranks' mean loss");
  const double n = static_cast<double>(since.steps);
  const trainer::PhaseTimes& t = since.times;
  nlohmann::json line = {{"epoch", r.epoch},
                         {"step_in_epoch", r.stepInEpoch},
                         {"global_step", r.globalStep},
                         {"steps", since.steps},
                         {"loss", *r.windowLoss},
                         {"lr", r.learningRate},
                         {"samples_per_s", r.samplesPerSecond},
                         {"skipped_steps", since.skipped},
                         {"step_ms",
                          {{"total", t.total() / n * 1e3},
                           {"data", t.data / n * 1e3},
                           {"forward", t.forward / n * 1e3},
                           {"backward", t.backward / n * 1e3},
                           {"comm", t.comm / n * 1e3},
                           {"optimizer", t.optimizer / n * 1e3}}}};
  if (since.gradNorms > 0) {  // --clip-grad-norm, as the epoch line's
    line["grad_norm_mean"] = since.gradNormSum / static_cast<double>(since.gradNorms);
    line["grad_norm_max"] = since.gradNormMax;
    line["clipped_steps"] = since.clipped;
  }
  since = {};
  writeMetrics(line.dump(), str("step ", r.globalStep, " and later are"));
}

void ProgressPrinter::onStepEvaluation(const trainer::StepEvaluation& r) {
  if (!enabled_) return;
  endLiveLine();
  log::info(str("epoch ", r.epoch, "/", epochs_, "  step ", r.stepInEpoch, "/", r.stepsInEpoch,
                "  test_loss ", fixedOrExponent(r.test.loss, 4), "  test_acc ",
                fixed(100.0 * r.test.accuracy, 2), "%  (after step ", r.globalStep,
                " of the run, evaluated in ", fixed(r.seconds, 2), " s)"));
  if (const auto warning = nonFiniteTestWarning(str("after step ", r.globalStep), r.test)) {
    log::warn(*warning);
  }
  if (!writesMetrics()) return;
  nlohmann::json line = {{"epoch", r.epoch},
                         {"step_in_epoch", r.stepInEpoch},
                         {"global_step", r.globalStep},
                         {"test_loss", r.test.loss},
                         {"test_accuracy", r.test.accuracy},
                         {"test_samples", r.test.samples},
                         {"eval_time_s", r.seconds}};
  if (r.best) line["best"] = *r.best;
  writeMetrics(line.dump(), str("the evaluation after step ", r.globalStep, " and later are"));
}

void ProgressPrinter::onEvaluation(const EvaluationReport& report) {
  if (!enabled_) return;
  log::info(evaluationText(report));
  if (const auto warning = nonFiniteTestWarning(str("of ", report.file), report.result)) {
    log::warn(*warning);
  }
  writeMetrics(evaluationMetrics(report), "the evaluation is");
}

void ProgressPrinter::onRunEnd(const RunOutcome& outcome) {
  writeMetrics(runEndMetrics(outcome), "the run's end is", /*ends=*/true);
}

// Within an epoch: the same warnings, but only when the ranks they name
// change from the previous window's, so that a lasting straggler is named
// once, not every window.
void ProgressPrinter::onPace(const trainer::PaceReport& r) {
  const auto slow = stragglerIn(r);
  const auto straggler = slow ? std::optional<std::size_t>(slow->rank) : std::nullopt;
  const std::vector<std::size_t> contended = contendedRanks(r.rankCpu);
  if (!enabled_) return;
  const std::string when = paceSpan(r, false);
  if (straggler && straggler != windowStraggler_) {
    endLiveLine();
    log::warn(stragglerWarning(when, *slow, hosts_));
  }
  if (!contended.empty() && contended != windowContended_) {
    endLiveLine();
    log::warn(*contentionWarning(when, r.rankCpu, hosts_));
  }
  windowStraggler_ = straggler;
  windowContended_ = contended;
}

}  // namespace ddp::launcher
