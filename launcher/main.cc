// ddp_train: data-parallel training of one model replica per process.
//
//   mpirun -np N ddp_train [options]        srun --mpi=pmix ddp_train [options]
//
// Exit codes: 0 success, 2 usage error (bad option; reported before MPI starts,
// by rank 0 only), 1 any other failure (bad data, a failed rank, a hung
// collective), reported by the rank that saw it; 3 stopped by --time-limit,
// 128 + the signal that stopped it (both after writing a checkpoint).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "comm/agreement.h"
#include "comm/watchdog.h"
#include "launcher/best_evaluation.h"
#include "launcher/checkpoint_lock.h"
#include "launcher/disk_check.h"
#include "launcher/evaluate.h"
#include "launcher/fault_injection.h"
#include "launcher/job_ending.h"
#include "launcher/launcher_checks.h"
#include "launcher/memory_check.h"
#include "launcher/options.h"
#include "launcher/placement.h"
#include "launcher/progress.h"
#include "launcher/resume.h"
#include "launcher/run_config.h"
#include "launcher/run_end.h"
#include "launcher/run_end_recorder.h"
#include "launcher/run_report.h"
#include "launcher/time_limit.h"
#include "launcher/version.h"
#include "launcher/write_probe.h"
#include "runtime/cpu_share.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/memory.h"
#include "runtime/process_stops.h"
#include "runtime/signals.h"
#include "runtime/start_up_deadline.h"
#include "runtime/subnormals.h"
#include "runtime/trace.h"
#include "runtime/world.h"
#include "trainer/blas_kernels.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/mlp.h"
#include "trainer/safetensors.h"
#include "trainer/trainer.h"

namespace ddp::launcher {
namespace {

// --time-limit counts from here (Note [Stopping before a time limit]).
const TimeLimit::Clock::time_point kStartedAt = TimeLimit::Clock::now();

// Note [Files across nodes]
// Nodes need not share a file system. Files read once for the whole job
// (--init-from, the checkpoint --resume continues from) are read by rank 0
// and reach the other ranks over MPI: the weights by the start-up parameter
// broadcast, a checkpoint's tensors piece by piece once rank 0 has checked
// it (Note [Restoring a checkpoint from one rank] in
// trainer/checkpoint_broadcast.h). Rank 0 alone writes checkpoints,
// --save-model and --metrics, on its node. The training data is read by
// every rank from --data-dir on its own node: it is needed in full
// everywhere, and shipping 50 MB per start would only hide a missing install.
// The copies are compared instead: each rank's Dataset::fingerprint (a CRC-32
// of what it loaded) is one of the consistency items, so a node with another
// version of the files stops the job at start-up instead of training on
// other samples.
// tests/e2e/two_nodes.sh resumes from a directory only node a can see.

// A watchdog report, and the stacks it brought under it.
void logDiagnosis(const comm::Diagnosis& d) {
  log::error(str("watchdog: ", d.report));
  for (const std::string& line : d.details)
    log::error(line);
}

// Note [One report of a timeout] in comm/watchdog.h: a collective that
// timed out (`what`) on this rank is left to a lower rank waiting in it
// too, which reports it; this returns once this rank should report it after
// all: at once when no lower rank waits in it, else if the job still runs
// when that rank has had its time.
void leaveTimeoutToLowerRank(const comm::Watchdog& watchdog, std::chrono::milliseconds timeout,
                             const std::string& what) {
  const std::optional<comm::TimeoutDeferral> deferral = watchdog.lowerRankReportingTimeout(timeout);
  if (!deferral) return;
  log::info(str(what, "; rank ", deferral->rank, " ", deferral->why));
  stops::Deadline deadline(deferral->patience);  // a stopped process's time left out
  while (!deadline.passed())
    std::this_thread::sleep_until(deadline.nextLook());
  log::warn(str("watchdog: the job still runs ", fixed(deferral->patience.count() / 1000.0, 1),
                " s after this rank left its timeout to rank ", deferral->rank,
                ": this rank reports it"));
}

// How rank 0 stages checkpoints, on every rank: checkNodeMemory chooses it
// there, and the others must know whether to join its stream of a sharded
// optimizer's state (trainer::streamsState).
trainer::CheckpointStaging rankZeroStaging(comm::Communicator& comm,
                                           trainer::CheckpointStaging staging) {
  std::int32_t direct = staging == trainer::CheckpointStaging::kDirect ? 1 : 0;
  comm.broadcast(&direct, 1, comm::DataType::kInt32, 0)->wait(comm.options().timeout);
  return direct != 0 ? trainer::CheckpointStaging::kDirect : trainer::CheckpointStaging::kCopy;
}

// --evaluate, once the weights are on rank 0 and the model on its device
// (Note [Evaluating without training] in launcher/evaluate.h): no optimizer,
// no Reducer, no Trainer. `threads`: a GPU's batch-gathering threads.
// Collective.
int evaluateWeights(comm::Communicator& comm, const World& world, const Options& o,
                    trainer::Sequential& model, const Data& data, unsigned threads,
                    ProgressPrinter& progress, EvaluationReport report) {
  trainer::broadcastParameters(comm, model);
  trainer::BatchLoader batches(model.device(), threads);
  const auto start = std::chrono::steady_clock::now();
  report.result =
      trainer::evaluate(comm, model, *data.test, o.evalBatchSize, batches, o.evalSamples);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.testSet = data.test->name();
  report.ranks = world.size();
  progress.onEvaluation(report);
  comm.setContext("end: writing --save-model");
  comm::agree(comm, [&] {
    if (world.rank() == 0 && !o.saveModel.empty()) {
      trainer::ModelOrigin origin;
      origin.step = report.weightsStep();
      origin.savedBy = "--evaluate --save-model";
      origin.evaluation = report.result;
      trainer::saveModel(o.saveModel, model, trainer::originMetadata(origin));
      log::info(str("saved weights to ", o.saveModel));
    }
  });
  return kExitOk;
}

// Rank 0, with --time-limit: a write timed where the run writes, which the
// limit keeps time for until a checkpoint has been timed (Note [The first
// write's time] in launcher/write_probe.h). What the start-up line says of
// it; nullopt when the run writes no file, or when the write failed (warned
// of here).
std::optional<std::string> timeFirstWrites(TimeLimit& limit, const Options& o,
                                           const OutputFiles& files,
                                           trainer::CheckpointStaging staging) {
  if (o.checkpointDir.empty() && o.saveModel.empty()) return std::nullopt;
  const std::string dir = !o.checkpointDir.empty()
                              ? o.checkpointDir
                              : std::filesystem::path(o.saveModel).parent_path().string();
  const std::uint64_t largest =
      std::max(o.checkpointDir.empty() ? 0 : files.checkpointBytes, files.modelBytes);
  std::string whyNot;
  const std::optional<WriteTime> probe = timeWrite(dir.empty() ? "." : dir, largest, &whyNot);
  if (!probe) {
    log::warn(str("--time-limit: a write could not be timed at start-up (", whyNot,
                  "), so nothing is kept for the last writes until a checkpoint has been timed"));
    return std::nullopt;
  }
  // The first checkpoint staged in a copy allocates it.
  const std::optional<WriteTime> copy =
      !o.checkpointDir.empty() && staging == trainer::CheckpointStaging::kCopy
          ? timeFreshMemory(files.checkpointBytes)
          : std::nullopt;
  const double checkpoint = probe->secondsFor(files.checkpointBytes) +
                            (copy ? copy->secondsFor(files.checkpointBytes) : 0);
  const double model = probe->secondsFor(files.modelBytes);
  limit.expectWrites(checkpoint, model);
  return str("until a checkpoint has been timed, it keeps ",
             fixed(!o.checkpointDir.empty() ? checkpoint : model, 2), " s for ",
             !o.checkpointDir.empty() ? "a checkpoint" : "--save-model's weights", " (a write of ",
             bytesString(static_cast<double>(probe->bytes)), " there took ",
             fixed(probe->seconds, 2), " s",
             copy ? str(", and ", bytesString(static_cast<double>(copy->bytes)),
                        " of fresh memory for its copy ", fixed(copy->seconds, 2), " s")
                  : std::string(),
             ")");
}

// Rank 0, for a usage error found before the communicator exists (the
// world size or the node's GPUs show it): the --metrics file's end line,
// so that it too ends as Note [The run's last --metrics line] says. Returns
// kExitUsage.
int endBeforeStartUp(const Options& o, int rank, const std::string& error) {
  if (rank != 0 || o.metrics.empty() || o.evaluate) return kExitUsage;
  try {
    ProgressPrinter printer(rank, o.epochs, o.logEvery, o.metrics, o.metricsEvery, {});
    RunEndRecorder ending(kStartedAt);
    ending.setWriter([&printer](const RunOutcome& out) { printer.onRunEnd(out); },
                     [&printer] { return printer.lastReportedStep(); });
    ending.endWithError(error, kExitUsage);
  } catch (const std::exception& e) {
    log::warn(str("--metrics: the run's end line was not written: ", e.what()));
  }
  return kExitUsage;
}

// `o` by value: --global-batch completes it once the world size is known.
int train(Options o) {
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(o.timeoutSeconds * 1000));
  // Note [Before the watchdog]: until the watchdog runs, a limit of its own.
  StartUpDeadline deadline(
      std::max<std::chrono::milliseconds>(timeout, kMinStartUpLimit),
      str("--timeout, and at least ", kMinStartUpLimit.count(), " s at start-up"), kExitFailure,
      "MPI_Init (and the node layout)",
      "MPI_Init returns only once every rank of the job has started and reached it, so some rank "
      "has not: its node may be slow to start or to load the program, a rank may have failed "
      "before starting MPI (see the launcher's messages), or the nodes may not reach each other");
  World world;
  log::setAllRanks(o.logAllRanks);
  if (world.rank() == 0) {
    for (const std::string& warning : o.warnings)
      log::warn(warning);
  }
  // An evaluation has no step, so no global batch to keep.
  if (const auto error = o.evaluate ? std::nullopt : applyGlobalBatch(o, world.size())) {
    if (world.rank() == 0) log::error(str("ddp_train: ", *error, " (see ddp_train --help)"));
    return endBeforeStartUp(o, world.rank(), *error);
  }
  const char* const everyRank = "it waits for every rank, and some rank has not arrived";
  deadline.enter("choosing the device", everyRank);
  const Placement placement = choosePlacement(o, world);
  if (!placement.error.empty()) {
    if (placement.printsError) log::error(str("ddp_train: ", placement.error));
    return endBeforeStartUp(o, world.rank(), placement.error);
  }
  if (placement.device == trainer::Device::kCuda) printPlacements(placement, world);
  comm::CommOptions commOptions;
  commOptions.timeout = timeout;
  commOptions.checkNonFinite = true;              // the trainer checks every step's gradients
  commOptions.sumOfSquares = o.clipGradNorm > 0;  // the gradient's norm, for clipping
  commOptions.twoLevelAcrossNodes = o.twoLevelAllreduce == "auto";
  // Set once the watchdog runs, cleared before it is released; read by
  // the threads that may end the job, the NCCL watchdog's among them, which
  // runs until the communicator is gone: a thread that ends the job keeps
  // the watchdog it loaded alive (it never returns), so a failure met while
  // this scope unwinds finds the watchdog whole, or none.
  std::atomic<std::shared_ptr<const comm::Watchdog>> explainer;
  const auto explain = [&explainer](const std::string& report) {
    log::error(report);
    if (const auto watchdog = explainer.load()) {
      logDiagnosis(watchdog->diagnose(/*withStacks=*/true));  // the job ends next
    }
  };
  // Note [One end line, from any thread] in launcher/run_end_recorder.h:
  // what rank 0 will say of the run's end, and who writes it.
  RunEndRecorder ending(kStartedAt);
  comm::WatchdogOptions watchdogOptions;
  // Rank 0: the run's end line for a job ending because of `why`, written
  // on a thread of its own and waited for a bounded time (the job ends
  // whatever the file system does).
  const auto recordEnding = [&](const std::string& why) {
    ending.endWithErrorWithin(why, watchdogOptions.endingPatience);
  };
  // This rank sets out to end the job (MPI_Abort) because of `why`: rank 0
  // writes its end line first (bounded: the job ends whatever its file
  // system does), another rank tells rank 0 (Note [Telling rank 0 that the
  // job ends]), which answers with the rank that ended the job before this
  // one, if any (Note [One rank ends the job]).
  const auto tellRankZero = [&](const std::string& why) noexcept -> std::optional<std::string> {
    try {
      const auto watchdog = explainer.load();
      if (world.rank() == 0 && watchdog == nullptr) {
        recordEnding(why);
      } else if (world.rank() == 0) {
        return watchdog->announceEnding(why);
      } else if (watchdog != nullptr) {
        // Named once, with its host ("rank 2: ..." from a collective's error).
        const std::string self = str("rank ", world.rank());
        const bool named = why.rfind(self + ": ", 0) == 0;
        return watchdog->announceEnding(
            str(self, " (", world.hostname(), "): ", named ? why.substr(self.size() + 2) : why));
      }
    } catch (const std::exception& e) {
      log::warn(str("--metrics: the run's end line was not written: ", e.what()));
    }
    return std::nullopt;
  };
  // Note [One thread ends the job] in launcher/job_ending.h.
  JobEnding jobEnding(
      tellRankZero,
      [&world, &explainer] {
        // Note [One rank ends the job]: a later claim is refused, not left unanswered.
        if (const auto watchdog = explainer.load()) watchdog->stopServing();
        world.abort(kExitFailure);
      },
      comm::endingTime(watchdogOptions));
  // What to print when a collective failed or hung (the training thread
  // met it, or the NCCL watchdog gave up on it): peers may be blocked, so
  // the job ends, saying who did not arrive; a timeout is left to the
  // lowest rank waiting in it (Note [One report of a timeout]).
  const auto reportCollective = [&explain](const CommError& e) {
    return [&explain, &e] { explain(e.what()); };
  };
  const auto leaveToLowerRank = [&explainer, timeout](const CommError& e) {
    return [&explainer, timeout, &e] {
      const auto watchdog = explainer.load();
      if (watchdog && dynamic_cast<const CommTimeoutError*>(&e) != nullptr)
        leaveTimeoutToLowerRank(*watchdog, timeout, e.what());
    };
  };
  deadline.enter("creating the communicator",
                 placement.device == trainer::Device::kCuda
                     ? "ncclCommInitRank returns once every rank has joined, and some rank has not"
                     : everyRank);
  // A collective the NCCL watchdog gave up on: peers may be stuck, end the job.
  std::unique_ptr<comm::Communicator> communicator =
      makeCommunicator(placement, world, commOptions, [&](const CommError& e) {
        jobEnding.end(e.what(), reportCollective(e), leaveToLowerRank(e));
      });
  comm::Communicator& comm = *communicator;
  // Kept outside the try below, for a failure's handler (the try's locals
  // are gone by then), and made before the watchdog, whose threads may
  // write the end line through it until the watchdog is destroyed.
  std::unique_ptr<ProgressPrinter> progress;
  std::shared_ptr<comm::Watchdog> watchdog;  // Note [Watchdog reports]
  const struct ForgetWatchdog {
    std::atomic<std::shared_ptr<const comm::Watchdog>>& explainer;
    ~ForgetWatchdog() { explainer.store(nullptr); }  // before `watchdog` is released
  } forgetWatchdog{explainer};
  deadline.enter("sharing out the CPUs and learning the ranks' hosts", everyRank);
  const CpuShare cpus = shareCpus(world);
  const std::vector<std::string> hosts = hostOfEachRank(world);  // for naming a rank
  const ThreadCount threadCount = chooseThreads(o.threads, cpus, std::getenv);
  const int threads = threadCount.threads;  // Note [Threads per rank]
  trainer::setBlasThreads(threads);

  // Note [Keeping the best weights] in launcher/best_evaluation.h; made
  // once the resumed checkpoint's record is known.
  std::optional<BestEvaluation> best;
  // A failure rank 0's main thread learned of, after which it returns: its
  // end line, if it can still write one.
  const auto endRunWithError = [&](const std::string& error, int exitCode) noexcept {
    try {
      ending.endWithError(error, exitCode);
    } catch (const std::exception& e) {
      log::warn(str("--metrics: the run's end line was not written: ", e.what()));
    }
  };
  try {
    watchdogOptions.stallAfter =
        std::min(commOptions.timeout / 2,
                 std::chrono::milliseconds(static_cast<long long>(o.stallWarningSeconds * 1000)));
    // Note [Where a stuck rank is]: after the peers' own timeout would have fired.
    watchdogOptions.quietAfter =
        commOptions.timeout +
        std::max(commOptions.timeout / 10, std::chrono::milliseconds(std::chrono::seconds(2)));
    // Note [A stop asked for while a peer has ended] in comm/watchdog.h.
    watchdogOptions.stopRequested = [] { return stopSignal() != 0; };
    watchdog = std::make_shared<comm::Watchdog>(
        comm, world.hostname(), watchdogOptions,
        [&](const comm::Diagnosis& d) {
          jobEnding.end(str("watchdog: ", d.report), [&d] { logDiagnosis(d); });
        },
        recordEnding);  // rank 0, told by another rank
    explainer = watchdog;
    // Note [Where a stuck rank is]: from here on, start-up included (its
    // long local work sends heartbeats: Note [Heartbeats of local work]).
    watchdog->armQuietCheck();
    deadline.disarm();
    const FaultInjection fault = parseFaultInjection(o.injectFault);
    Data data;
    std::unique_ptr<trainer::Sequential> model;
    std::optional<CheckpointDirLock> checkpointLock;  // Note [One run per checkpoint directory]
    EvaluationReport evaluation;                      // --evaluate: rank 0's
    // Agreed on before any rank allocates (Note [Refusing a model the node
    // cannot hold]).
    // Before anything else can fail: a run that fails at start-up (its
    // data, its memory, an option the data shows to be bad) ends its
    // --metrics file with its end line too, so that a resumed part that
    // failed does not leave the previous part's end line last (Note [The
    // run's last --metrics line] in launcher/run_end.h).
    comm::agree(comm, [&] {
      progress = std::make_unique<ProgressPrinter>(world.rank(), o.epochs, o.logEvery, o.metrics,
                                                   o.metricsEvery, hosts);
      if (world.rank() == 0 && !o.evaluate) {  // --evaluate writes no end line
        ProgressPrinter* printer = progress.get();
        ending.setWriter([printer](const RunOutcome& out) { printer->onRunEnd(out); },
                         [printer] { return printer->lastReportedStep(); });
        ending.update([&](RunOutcome& out) {
          if (!o.checkpointDir.empty()) out.checkpoint = "";  // null until this run writes one
          if (!o.saveBest.empty()) out.bestFile = o.saveBest;
        });
      }
    });
    StagingChoice stagingChoice;
    comm::agree(comm, [&] { stagingChoice = checkNodeMemory(o, world, placement.device, cpus); });
    const trainer::CheckpointStaging staging = rankZeroStaging(comm, stagingChoice.staging);
    comm.setContext("start-up: loading the data and building the model");
    comm::agree(comm, [&] {
      stallAtStartUp(fault, world.rank());
      data = loadData(o);
      if (world.rank() == 0 && !o.evaluate)
        checkEveryRankTrains(o, data.train->size(), world.size());
      if (world.rank() == 0) checkEvalSamples(o, *data.test);
      // Both sets have the model's shape, and --evaluate loads the test set alone.
      model = trainer::buildMlp(data.test->featureDim(), o.hidden, data.test->numClasses(), o.seed);
      for (std::size_t layer : o.freezeLayers) {
        for (trainer::Parameter* p : model->layer(layer).parameters())
          p->trainable = false;
      }
      if (world.rank() == 0 && o.evaluate) {  // Note [Evaluating without training]
        evaluation.file = weightsToEvaluate(o);
        const trainer::WeightsSource source = trainer::loadWeights(evaluation.file, *model);
        evaluation.checkpointStep = source.checkpointStep;
        evaluation.origin = source.origin;
        if (source.origin) {
          log::info(
              str("evaluate: ", evaluation.file, " holds ", trainer::originText(*source.origin)));
        }
      } else if (world.rank() == 0 && !o.initFrom.empty() && checkpointToResume(o).empty()) {
        // Note [Resuming or starting from --init-from] in launcher/resume.h.
        reportInitFrom(o.initFrom, trainer::loadWeights(o.initFrom, *model));
      }
      checkOutputPaths(o, world.rank());
      if (world.rank() == 0 && !o.checkpointDir.empty() && !o.evaluate) {
        checkpointLock.emplace(o.checkpointDir);
        checkNoEarlierRun(o);
      }
    });
    comm::verifySameOnAllRanks(comm, consistencyItems(o, *model, data));
    printSummary(world, comm, o, threadCount, placement, *model, data);
    if (world.rank() == 0) {
      warnAboutPlacement(world, o, cpus, threads);
      const auto notice =
          o.evaluate ? std::nullopt : stagingNotice(stagingChoice, world.hostname());
      if (notice) log::info(*notice);
      const auto warning =
          o.evaluate ? std::nullopt : batchWarning(o, data.train->size(), world.size());
      if (warning) log::warn(*warning);
    }
    comm.setContext("start-up: moving the model to its device");
    model->to(placement.device);  // rank 0's --init-from weights go with it, then broadcast
    if (o.evaluate) {
      return evaluateWeights(comm, world, o, *model, data, static_cast<unsigned>(threads),
                             *progress, std::move(evaluation));
    }

    const std::unique_ptr<trainer::Optimizer> optimizer =
        buildOptimizer(o, model->parameters(), &comm);
    trainer::TrainOptions trainOptions = trainOptionsFrom(o);
    trainOptions.onBucketCapChosen = reportBucketCapChoice;
    trainOptions.hostThreads = static_cast<unsigned>(threads);  // GPU: batch gathering
    trainOptions.expectedCpuShare = expectedCpuShare(cpus, threads);
    trainOptions.quotaCgroup = cpus.quotaCgroup;
    trainOptions.rankHosts = hosts;
    // Rank 0 writes checkpoints in the background (Note [Checkpoints written
    // in the background]); agree() makes a failed write stop every rank cleanly.
    std::optional<TimeLimit> timeLimit;
    if (o.timeLimitSeconds > 0) {
      timeLimit.emplace(o.timeLimitSeconds, kStartedAt, !o.checkpointDir.empty(),
                        !o.saveModel.empty());
      trainOptions.timeUp = [&](double secondsToNextCheck) {
        return timeLimit->timeUp(secondsToNextCheck);
      };
    }
    std::optional<trainer::CheckpointWriter> checkpointWriter;
    if (!o.checkpointDir.empty() && world.rank() == 0) {
      checkpointWriter.emplace(
          [&, report = reportCheckpoint(o)](const std::string& path,
                                            const trainer::TrainPosition& at) {
            report(path, at);
            if (timeLimit) timeLimit->writeDone();
            ending.update([&](RunOutcome& out) { out.checkpoint = path; });
          },
          staging);
    }
    // The run's last evaluation, which --save-model records when the run
    // ends at its step (Note [Where a model file's weights came from]).
    std::optional<std::pair<trainer::EvalResult, std::size_t>> lastEvaluation;
    // judgeEvaluation's verdict (set with `best`, below), acted on after the
    // evaluation's report.
    trainOptions.onEvaluated = [&](const trainer::EvalResult& test, std::size_t step,
                                   const trainer::EvaluationVerdict& verdict) {
      lastEvaluation.emplace(test, step);
      if (!best) return;
      if (verdict.best && !o.saveBest.empty()) {
        comm::agree(comm, [&] {
          if (world.rank() == 0)
            trainer::saveModel(o.saveBest, *model, trainer::originMetadata(best->origin()));
        });
        if (world.rank() == 0) log::info(best->savedText(o.saveBest));
      }
      if (verdict.stop && world.rank() == 0) log::info(best->earlyStopText(o.earlyStop));
    };
    if (!o.checkpointDir.empty()) {
      trainOptions.onCheckpoint = [&](const trainer::TrainPosition& reached) {
        trainer::TrainPosition at = reached;
        if (best) best->markIn(at);
        // Sharded: rank 0 gets everyone's part once the last checkpoint is
        // written and its snapshot gone (Note [Checkpoints written in the
        // background]): gathered for the copy, or, written directly,
        // streamed into the file inside write(), a collective the other
        // ranks join (Note [Streaming a sharded optimizer's state]).
        const bool streamed = trainer::streamsState(staging, *optimizer);
        if (checkpointWriter) checkpointWriter->awaitIdle();
        if (checkpointWriter && timeLimit) timeLimit->writeStarted();
        if (!streamed) optimizer->gatherState(0);
        comm::agree(comm, [&] {
          if (checkpointWriter) {
            checkpointWriter->write(trainer::checkpointPath(o.checkpointDir, at.globalStep), *model,
                                    *optimizer, at, checkpointOptions(o));
          } else if (streamed) {
            optimizer->streamState(0, {});
          }
        });
        optimizer->releaseGatheredState();
      };
    }
    trainOptions.stopRequested = [] { return stopSignal(); };
    installFault(fault, comm, *model, trainOptions);
    trainer::TrainPosition start;
    if (!o.resume.empty()) {
      comm.setContext("start-up: reading the checkpoint");
      start = resumeFromCheckpoint(comm, world, o, *model, *optimizer, resumeOptions(o));
    }
    if (!o.saveBest.empty() || o.earlyStop > 0) {
      best.emplace(*trainer::parseBestMetric(o.bestMetric), o.earlyStopMinDelta, start.best);
      trainOptions.judgeEvaluation = [&](const trainer::EvalResult& test, std::size_t step) {
        const bool isBest = best->observe(test, step);
        ending.update([&](RunOutcome& out) { out.best = best->record(); });
        return trainer::EvaluationVerdict{isBest,
                                          o.earlyStop > 0 && best->sinceImproved() >= o.earlyStop};
      };
      if (const auto notice = best->resumeNotice(); notice && world.rank() == 0) log::info(*notice);
      comm::agree(comm, [&] {  // Note [A resumed run's best file]
        if (world.rank() != 0 || o.saveBest.empty() || best->record().step == 0) return;
        const std::string dir = std::filesystem::path(checkpointToResume(o)).parent_path().string();
        const auto notice = restoreBestFile(o.saveBest, *best, dir.empty() ? "." : dir, *model);
        if (notice) (notice->warning ? log::warn : log::info)(notice->text);
      });
    }
    trainer::Trainer trainer(comm, *model, *optimizer, *data.train, *data.test, trainOptions);
    ending.update([&](RunOutcome& out) {
      out.globalStep = start.globalStep;
      out.plannedSteps = trainer.plannedSteps();
      if (best) out.best = best->record();
    });
    printBuckets(trainer.reducer(), o);
    if (world.rank() == 0) {
      if (const auto warning = warmupWarning(o, trainer.plannedSteps())) log::warn(*warning);
      if (const auto warning = lrDecayWarning(o, trainer.plannedSteps())) log::warn(*warning);
    }
    comm::agree(comm, [&] {  // Note [Refusing files the disk cannot hold]
      if (world.rank() != 0) return;
      const OutputFiles files =
          outputFiles(o, start.globalStep, trainer.plannedSteps(), trainer.stepsPerEpoch());
      checkDiskRoom(o, files);
      if (!timeLimit) return;
      const std::optional<std::string> writes = timeFirstWrites(*timeLimit, o, files, staging);
      log::info(str("time limit: ", durationText(o.timeLimitSeconds),
                    " from ddp_train's start (--time-limit): the run stops before it, its last "
                    "writes done",
                    writes ? str("; ", *writes) : std::string()));
      if (o.checkpointDir.empty()) {
        log::warn(
            "--time-limit without --checkpoint-dir: a run it stops leaves nothing to resume from");
      }
    });
    trainer::broadcastParameters(comm, *model);
    if (start.globalStep > 0 || start.epoch > 1) trainer.resumeFrom(start);
    // Steps 6 to 15: past the first, slower steps, and few enough to read.
    constexpr std::size_t kTraceFirstStep = 5, kTraceSteps = 10;
    Trace trace(world.rank());
    if (!o.trace.empty()) trainer.setTrace(&trace, kTraceFirstStep, kTraceSteps);
    installStopHandlers();
    const bool stoppedBefore = best && o.earlyStop > 0 && best->sinceImproved() >= o.earlyStop;
    if (stoppedBefore) {
      if (world.rank() == 0) {
        log::info(str("resumed a run that had ", best->earlyStopText(o.earlyStop),
                      ": nothing to train (a larger --early-stop goes on)"));
      }
    } else {
      trainer.run(*progress);
    }
    reportRunEnd(trainer, o, timeLimit ? &*timeLimit : nullptr);
    comm.setContext("end: writing the last checkpoint, the trace and --save-model");

    comm::agree(comm, [&] {
      if (checkpointWriter) checkpointWriter->finish();  // the last checkpoint is on disk
      if (!o.trace.empty()) {
        const std::string path = tracePath(o, world.rank());
        trace.write(path);
        log::info(str("wrote trace ", path, world.size() > 1 ? " (and one per other rank)" : ""));
      }
      if (world.rank() == 0 && !o.saveModel.empty()) {
        trainer::ModelOrigin origin;
        origin.step = trainer.globalStep();
        origin.savedBy = "--save-model";
        if (lastEvaluation && lastEvaluation->second == trainer.globalStep())
          origin.evaluation = lastEvaluation->first;
        trainer::saveModel(o.saveModel, *model, trainer::originMetadata(origin));
        log::info(str("saved weights to ", o.saveModel));
      }
    });
    if (trainer.stoppedByTimeLimit() && world.rank() == 0) {
      const auto now = TimeLimit::Clock::now();
      (timeLimit->endedPastLimit(now) ? log::warn : log::info)(timeLimit->endText(now));
    }
    const int exitCode = trainer.stoppedBy() != 0       ? 128 + trainer.stoppedBy()
                         : trainer.stoppedByTimeLimit() ? kExitTimeLimit
                                                        : kExitOk;
    ending.end([&](RunOutcome& out) {
      out.exitCode = exitCode;
      out.endedBy = stoppedBefore ? "early_stop" : endedByName(trainer.ended());
      out.signal = trainer.stoppedBy();
      out.globalStep = trainer.globalStep();
      if (!o.saveModel.empty()) out.savedModel = o.saveModel;
    });
    return exitCode;
  } catch (const comm::PeerFailedError& e) {
    // Note [Usage errors after start-up]: a peer's too.
    const int exitCode = e.usage() ? kExitUsage : kExitFailure;
    log::error(e.what());
    endRunWithError(e.what(), exitCode);
    return exitCode;
  } catch (const CommError& e) {
    jobEnding.end(e.what(), reportCollective(e), leaveToLowerRank(e));
  } catch (const InternalError& e) {
    jobEnding.end(e.what(), [&e] { log::error(e.what()); });
  } catch (const OutOfMemoryError& e) {
    // Possibly outside agree(): the peers may be waiting in a collective.
    const std::string error = str("out of memory: ", e.what(),
                                  " (try a smaller model or batch, or fewer ranks per node)");
    jobEnding.end(error, [&error] { log::error(error); });
  } catch (const DeviceError& e) {
    // A CUDA failure on this rank's GPU: the peers may be waiting in NCCL.
    jobEnding.end(e.what(), [&e] { log::error(e.what()); });
  } catch (const Error& e) {
    // Raised inside agree() (every rank knows and stops), met alike by
    // every rank (a non-finite loss, a mismatch at start-up), or by this
    // rank alone, whose peers wait for it: Note [A rank that leaves
    // training alone] in comm/watchdog.h.
    // Note [Usage errors after start-up].
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    log::error(usage ? str(e.what(), " (see ddp_train --help)") : std::string(e.what()));
    endRunWithError(e.what(), usage ? kExitUsage : kExitFailure);
    if (watchdog && !e.agreed()) watchdog->announceLeaving(e.what());
    return usage ? kExitUsage : kExitFailure;
  } catch (const std::exception& e) {
    // Reached only from code outside agree(): the other ranks may be waiting.
    const std::string error = describeFailure(e);
    jobEnding.end(error, [&error] { log::error(error); });
  }
}

}  // namespace
}  // namespace ddp::launcher

int main(int argc, char** argv) {
  using namespace ddp;
  // Before any BLAS call and any thread of ours (Note [OpenBLAS kernels on
  // CPUs newer than the library] in trainer/blas_kernels.h).
  trainer::fitBlasKernelsToCpu();
  installBrokenPipeHandler();  // Note [Broken pipes] in runtime/signals.h
  const bool rankZero = rankFromEnvironment() == 0;
  launcher::Options options;
  try {
    options = launcher::parseOptions(argc, argv);
  } catch (const NodeUsageError& e) {
    // Perhaps only this node lacks the file: each node's first rank says so.
    if (rankZero) {
      log::plain(str("ddp_train: ", e.what()));
    } else if (localRankFromEnvironment() == 0) {
      log::plain(
          str("ddp_train: on ", thisHostname(), " (rank ", rankFromEnvironment(), "): ", e.what()));
    }
    return kExitUsage;
  } catch (const UsageError& e) {
    if (rankZero) log::plain(str("ddp_train: ", e.what(), " (see ddp_train --help)"));
    return kExitUsage;
  }
  if (options.help) {
    if (rankZero) std::cout << launcher::usageText();
    return kExitOk;
  }
  if (options.version) {
    if (rankZero) std::cout << launcher::versionText();
    return kExitOk;
  }
  if (const auto error = launcher::srunWithoutPmiError(std::getenv)) {
    if (rankZero) log::plain(str("ddp_train: ", *error));
    return kExitUsage;
  }
  if (localRankFromEnvironment() == 0) {  // Note [A process memory limit]
    const auto limit = processMemoryLimit();
    if (const auto warning =
            limit ? launcher::processLimitWarning(*limit, thisHostname()) : std::nullopt)
      log::plain(str("ddp_train: warning: ", *warning));
  }
  // Before MPI_Init starts threads, so that every thread of this process
  // takes the mode (Note [Subnormal floats] in runtime/subnormals.h).
  if (!options.keepSubnormals && setFlushSubnormals(true)) trainer::restartBlasThreads();
  try {
    return launcher::train(options);
  } catch (const std::exception& e) {  // before the job was set up (MPI start-up)
    log::plain(str("ddp_train: ", describeFailure(e)));
    return kExitFailure;
  }
}
