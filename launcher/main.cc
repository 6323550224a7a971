// ddp_train: data-parallel training of one model replica per process.
//
//   mpirun -np N ddp_train [options]        srun --mpi=pmix ddp_train [options]
//
// Exit codes: 0 success, 2 usage error (bad option; reported before MPI starts,
// by rank 0 only), 1 any other failure (bad data, a failed rank, a hung
// collective), reported by the rank that saw it.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "comm/agreement.h"
#include "comm/consistency.h"
#include "comm/reducer.h"
#include "comm/watchdog.h"
#include "launcher/fault_injection.h"
#include "launcher/launcher_checks.h"
#include "launcher/options.h"
#include "launcher/placement.h"
#include "launcher/progress.h"
#include "runtime/cpu_share.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/memory.h"
#include "runtime/signals.h"
#include "runtime/trace.h"
#include "runtime/world.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/fashion_mnist.h"
#include "trainer/mlp.h"
#include "trainer/safetensors.h"
#include "trainer/synthetic_dataset.h"
#include "trainer/trainer.h"

namespace ddp::launcher {
namespace {

struct Data {
  std::unique_ptr<trainer::Dataset> train;
  std::unique_ptr<trainer::Dataset> test;
};

Data loadData(const Options& o) {
  if (o.dataset == "synthetic") {
    const std::size_t features = 784, classes = 10;
    return {std::make_unique<trainer::SyntheticDataset>(o.syntheticSamples, features, classes,
                                                        o.seed, 0),
            std::make_unique<trainer::SyntheticDataset>(
                std::max<std::size_t>(1, o.syntheticSamples / 4), features, classes, o.seed, 1)};
  }
  return {trainer::loadFashionMnist(o.dataDir, trainer::Split::kTrain),
          trainer::loadFashionMnist(o.dataDir, trainer::Split::kTest)};
}

void printSummary(const World& world, const comm::Communicator& comm, const Options& o, int threads,
                  const Placement& placement, trainer::Sequential& model, const Data& data) {
  const std::size_t params = model.parameterCount();
  const std::string device =
      placement.device == trainer::Device::kCuda
          ? placement.summary
          : str("cpu (", threads, " BLAS thread", threads > 1 ? "s" : "", " per rank)");
  // "2 per node", or "3+1 per node" when the nodes differ.
  std::vector<std::size_t> perNode;
  for (const NodeLayout& node : world.nodes())
    perNode.push_back(node.ranks.size());
  const bool even = std::all_of(perNode.begin(), perNode.end(),
                                [&](std::size_t n) { return n == perNode.front(); });
  log::info(str("ddp_train: ", world.size(), " rank", world.size() > 1 ? "s" : "", " on ",
                world.nodeCount(), " node", world.nodeCount() > 1 ? "s" : "", " (",
                even ? str(perNode.front()) : join(perNode, "+"), " per node), launcher ",
                launcherName(world.launcher()), ", backend ", comm.backendName(), ", device ",
                device));
  if (world.nodeCount() > 1) log::info(str("nodes: ", describeNodes(world.nodes())));
  log::info(str("model ", o.model, ": ", model.describe(), ": ", params, " parameters (",
                fixed(static_cast<double>(params) * 4 / (1 << 20), 1), " MiB)"));
  const std::size_t global = o.batchSize * static_cast<std::size_t>(world.size());
  log::info(str("data ", data.train->name(), " ", data.train->size(), " samples, ",
                data.test->name(), " ", data.test->size(), "; global batch ", global, " (",
                o.batchSize, " per rank x ", world.size(), "), lr ", o.lr, " (", o.lrSchedule,
                "), momentum ", o.momentum, ", weight decay ", o.weightDecay, ", seed ", o.seed));
}

// --bucket-cap-mb at or above this (or inf): one bucket, no overlap.
constexpr double kSingleBucketMb = 1 << 20;

// Note [Files across nodes]
// Nodes need not share a file system. Files read once for the whole job
// (--init-from, the checkpoint --resume continues from) are read by rank 0
// and reach the other ranks over MPI: the weights by the start-up parameter
// broadcast, a checkpoint as its bytes (comm::shareFrom), so every rank
// validates and restores the same file. Rank 0 alone writes checkpoints,
// --save-model and --metrics, on its node. The training data is read by
// every rank from --data-dir on its own node: it is needed in full
// everywhere, and shipping 50 MB per start would only hide a missing install.
// tests/e2e/two_nodes.sh resumes from a directory only node a can see.

// The options that change what a training step computes.
std::vector<std::pair<std::string, std::string>> computationOptions(const Options& o) {
  return {{"dataset", o.dataset},
          {"synthetic-samples", str(o.syntheticSamples)},
          {"model", o.model},
          {"hidden", join(o.hidden, ",")},
          {"freeze", join(o.freezeLayers, ",")},
          {"batch-size", str(o.batchSize)},
          {"grad-accum", str(o.gradAccum)},
          {"lr", str(o.lr)},
          {"lr-schedule", o.lrSchedule},
          {"momentum", str(o.momentum)},
          {"weight-decay", str(o.weightDecay)},
          {"seed", str(o.seed)},
          {"no-shuffle", str(o.noShuffle)},
          {"drop-last", str(o.dropLast)}};
}

// What every rank must agree on before the first step: each parameter (name,
// dtype, shape, frozen) and each option that changes the computation.
comm::ConsistencyItems consistencyItems(const Options& o, trainer::Sequential& model) {
  comm::ConsistencyItems items;
  for (trainer::Parameter* p : model.parameters()) {
    items.emplace_back(
        str("parameter ", p->name),
        str("float32 ", trainer::shapeString(p->value.shape()), p->trainable ? "" : " frozen"));
  }
  std::vector<std::pair<std::string, std::string>> options = computationOptions(o);
  options.insert(options.end(), {{"grad-compression", o.gradCompression},
                                 {"bucket-cap-mb", o.bucketCapAuto ? "auto" : str(o.bucketCapMb)},
                                 {"epochs", str(o.epochs)},
                                 {"max-steps", str(o.maxSteps)},
                                 {"device", o.device}});
  for (const auto& [name, value] : options)
    items.emplace_back(str("option --", name), value);
  return items;
}

// The options a checkpoint records and a resumed run must match (as
// "ddp.option.<name>"): computationOptions(), not the run's length (--epochs,
// --max-steps: a run may be extended; with the cosine schedule the rate then
// follows the new plan), the world size (the rest of the epoch is re-sharded)
// or how gradients travel.
trainer::CheckpointOptions checkpointOptions(const Options& o) {
  trainer::CheckpointOptions recorded;
  for (const auto& [name, value] : computationOptions(o))
    recorded.emplace("ddp.option." + name, value);
  return recorded;
}

// "25 MiB" or "one bucket", for a cap in bytes.
std::string capName(std::size_t cap) {
  if (cap == comm::kSingleBucket) return "one bucket";
  return str(fixed(static_cast<double>(cap) / (1 << 20), 0), " MiB");
}

std::string mib(std::size_t cap) {
  return cap == comm::kSingleBucket ? std::string("inf")
                                    : fixed(static_cast<double>(cap) / (1 << 20), 0);
}

void printBuckets(const comm::Reducer& reducer, const Options& o) {
  std::vector<std::string> sizes;
  std::size_t frozen = 0;
  for (const comm::Bucket& bucket : reducer.buckets()) {
    sizes.push_back(fixed(static_cast<double>(bucket.count) * 4 / (1 << 20), 2));
  }
  for (const comm::GradientSpec& spec : reducer.gradients())
    frozen += spec.requiresGrad ? 0 : 1;
  log::info(str(
      "reducer: ", reducer.buckets().size(), " gradient bucket",
      reducer.buckets().size() == 1 ? "" : "s", " of [", join(sizes, ", "), "] MiB (cap ",
      o.bucketCapAuto ? str("auto: first trying ", mib(reducer.options().bucketCapBytes))
                      : str(o.bucketCapMb),
      " MiB, the first capped at 1 MiB)",
      frozen > 0 ? str(", ", frozen, " frozen parameter tensors not communicated") : std::string(),
      o.gradAccum > 1 ? str(", ", o.gradAccum, " micro-batches per step") : std::string(),
      o.gradCompression == "bf16" ? ", sent as bfloat16" : ""));
}

int train(const Options& o) {
  World world;
  log::setAllRanks(o.logAllRanks);
  const Placement placement = choosePlacement(o, world);
  if (!placement.error.empty()) {
    if (placement.printsError) log::error(str("ddp_train: ", placement.error));
    return kExitUsage;
  }
  if (placement.device == trainer::Device::kCuda) printPlacements(placement, world);
  comm::CommOptions commOptions;
  commOptions.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeoutSeconds * 1000));
  commOptions.checkNonFinite = true;  // the trainer checks every step's gradients
  // Set once the watchdog runs; read by the NCCL watchdog's thread.
  std::atomic<const comm::Watchdog*> explainer{nullptr};
  const auto explain = [&explainer](const std::string& report) {
    log::error(report);
    if (const comm::Watchdog* watchdog = explainer.load()) {
      log::error(str("watchdog: ", watchdog->diagnose().report));
    }
  };
  // A collective the NCCL watchdog gave up on: peers may be stuck, end the job.
  std::unique_ptr<comm::Communicator> communicator = makeCommunicator(
      placement, world, commOptions, [&world, &explain](const std::string& report) {
        explain(report);
        world.abort(kExitFailure);
      });
  comm::Communicator& comm = *communicator;
  std::unique_ptr<comm::Watchdog> watchdog;  // Note [Watchdog reports]
  const CpuShare cpus = shareCpus(world);
  const int threads = cpus.threadsOr(o.threads);  // Note [Threads per rank]
  trainer::setBlasThreads(threads);

  try {
    comm::WatchdogOptions watchdogOptions;
    watchdogOptions.stallAfter =
        std::min(commOptions.timeout / 2,
                 std::chrono::milliseconds(static_cast<long long>(o.stallWarningSeconds * 1000)));
    watchdog = std::make_unique<comm::Watchdog>(comm, world.hostname(), watchdogOptions,
                                                [&world](const std::string& report) {
                                                  log::error(str("watchdog: ", report));
                                                  world.abort(kExitFailure);
                                                });
    explainer = watchdog.get();
    Data data;
    std::unique_ptr<trainer::Sequential> model;
    std::unique_ptr<ProgressPrinter> progress;
    comm::agree(comm, [&] {
      data = loadData(o);
      model =
          trainer::buildMlp(data.train->featureDim(), o.hidden, data.train->numClasses(), o.seed);
      for (std::size_t layer : o.freezeLayers) {
        for (trainer::Parameter* p : model->layer(layer).parameters())
          p->trainable = false;
      }
      if (world.rank() == 0 && !o.initFrom.empty()) trainer::loadModel(o.initFrom, *model);
      if (world.rank() == 0 && !o.checkpointDir.empty()) {
        std::error_code error;
        std::filesystem::create_directories(o.checkpointDir, error);
        if (error) {
          throw DataError(
              str("--checkpoint-dir: cannot create '", o.checkpointDir, "': ", error.message()));
        }
        try {  // a directory it may not write to fails here, not at the first checkpoint
          trainer::checkCanSave(trainer::checkpointPath(o.checkpointDir, 0));
        } catch (const DataError& e) {
          throw DataError(str("--checkpoint-dir: ", e.what()));
        }
      }
      // Found now, not after the run whose result it would hold.
      if (world.rank() == 0 && !o.saveModel.empty()) {
        try {
          trainer::checkCanSave(o.saveModel);
        } catch (const DataError& e) {
          throw DataError(str("--save-model: ", e.what()));
        }
      }
      progress = std::make_unique<ProgressPrinter>(world.rank(), o.epochs, o.logEvery, o.metrics);
    });
    comm::verifySameOnAllRanks(comm, consistencyItems(o, *model));
    printSummary(world, comm, o, threads, placement, *model, data);
    if (world.rank() == 0) {
      if (auto warning = idleCpuWarning(cpus, threads, world.localSize(), world.launcher())) {
        log::warn(*warning);
      }
      if (auto warning = threadsWarning(threads, cpus)) log::warn(*warning);
    }
    if (world.launcher() == Launcher::kMpirun && world.nodeCount() > 1 && world.rank() == 0) {
      // Note [Lost nodes under mpirun]
      const auto warning = keepaliveWarning(keepaliveFromEnvironment(std::getenv), o.timeoutSeconds,
                                            o.stallWarningSeconds);
      if (warning) log::warn(*warning);
    }
    model->to(placement.device);  // rank 0's --init-from weights go with it, then broadcast

    trainer::Sgd sgd(model->parameters(), {static_cast<float>(o.lr), static_cast<float>(o.momentum),
                                           static_cast<float>(o.weightDecay), false});
    trainer::TrainOptions trainOptions;
    trainOptions.epochs = o.epochs;
    trainOptions.maxSteps = o.maxSteps;
    trainOptions.batchSize = o.batchSize;
    trainOptions.gradAccum = o.gradAccum;
    trainOptions.compression =
        o.gradCompression == "bf16" ? comm::GradCompression::kBf16 : comm::GradCompression::kNone;
    trainOptions.bucketCapBytes = o.bucketCapMb >= kSingleBucketMb
                                      ? comm::kSingleBucket
                                      : static_cast<std::size_t>(o.bucketCapMb * (1 << 20));
    trainOptions.firstBucketBytes = std::size_t{1} << 20;  // or the cap, if smaller
    trainOptions.autoBucketCap = o.bucketCapAuto;
    trainOptions.onBucketCapChosen = [](std::size_t cap, const std::vector<std::size_t>& caps,
                                        const std::vector<double>& medians, std::size_t steps) {
      std::vector<std::string> tried;
      for (std::size_t i = 0; i < caps.size(); ++i)
        tried.push_back(str(capName(caps[i]), ": ", fixed(medians[i] * 1e3, 2), " ms"));
      log::info(str("reducer: bucket cap auto chose ", capName(cap),
                    " (median step of the slowest rank: ", join(tried, ", "), "; ", steps,
                    " steps of tuning)"));
    };
    trainOptions.lrSchedule = trainer::parseLrSchedule(o.lrSchedule);
    trainOptions.sampler = {!o.noShuffle, o.dropLast, o.seed};
    trainOptions.lossReadEvery = o.logEvery;
    trainOptions.checkpointEvery = o.checkpointEvery;
    // Rank 0 writes checkpoints in the background (Note [Checkpoints written
    // in the background]); agree() makes a failed write stop every rank cleanly.
    std::optional<trainer::CheckpointWriter> checkpointWriter;
    if (!o.checkpointDir.empty() && world.rank() == 0) {
      checkpointWriter.emplace([&](const std::string& path, const trainer::TrainPosition& at) {
        // A position at the start of an epoch is the end of the one before.
        const std::string where =
            at.consumed == 0 && at.epoch > 1
                ? str("end of epoch ", at.epoch - 1)
                : str("epoch ", at.epoch, ", ", at.consumed, " of its samples done");
        log::info(str("checkpoint: wrote ", path, " (", where, ", step ", at.globalStep, ")"));
        if (o.keepCheckpoints == 0) return;
        std::vector<std::string> failed;
        const auto deleted =
            trainer::pruneCheckpoints(o.checkpointDir, at.globalStep, o.keepCheckpoints, &failed);
        if (!deleted.empty()) {
          log::info(str("checkpoint: deleted ", join(deleted, ", "), " (--keep-checkpoints ",
                        o.keepCheckpoints, ")"));
        }
        if (!failed.empty()) log::warn(str("checkpoint: could not delete ", join(failed, ", ")));
      });
    }
    if (!o.checkpointDir.empty()) {
      trainOptions.onCheckpoint = [&](const trainer::TrainPosition& at) {
        comm::agree(comm, [&] {
          if (!checkpointWriter) return;
          checkpointWriter->write(trainer::checkpointPath(o.checkpointDir, at.globalStep), *model,
                                  sgd, at, checkpointOptions(o));
        });
      };
    }
    trainOptions.stopRequested = [] { return stopSignal(); };
    trainOptions.skipNonFinite = o.skipNonFinite;
    installFault(parseFaultInjection(o.injectFault), comm, trainOptions);
    trainer::TrainPosition start;
    if (!o.resume.empty()) {
      // Rank 0 finds and reads the checkpoint, every rank gets it over MPI:
      // nodes need not share the directory (Note [Files across nodes]).
      std::string file, previous;
      auto bytes = std::make_shared<std::string>();
      comm::agree(comm, [&] {
        if (world.rank() != 0) return;
        if (o.resume != "latest") {
          file = o.resume;
        } else if (const auto all = trainer::completeCheckpoints(o.checkpointDir); !all.empty()) {
          file = all.back();
          if (all.size() > 1) previous = all[all.size() - 2];
        }
        if (!file.empty()) *bytes = trainer::readWholeFile(file);
      });
      comm::shareFrom(comm, 0, file);
      comm::shareFrom(comm, 0, *bytes);
      comm::agree(comm, [&] {
        if (file.empty()) return;
        trainer::SafetensorsFile parsed;
        try {
          parsed = trainer::parseSafetensors(bytes, file);
        } catch (const DataError& e) {
          if (previous.empty()) throw;
          // A damaged newest checkpoint: say how to fall back, but do not do
          // it unasked (damage means a disk or a copy to look at).
          throw DataError(str(e.what(), "; to resume from the checkpoint before it, ", previous,
                              ", move ", file, " out of ", o.checkpointDir));
        }
        start = trainer::restoreCheckpoint(file, parsed, *model, sgd, checkpointOptions(o));
      });
      if (file.empty()) {
        log::info(str("resume: no checkpoint in ", o.checkpointDir, " yet; starting fresh"));
      } else {
        log::info(
            str("resume: from ", file, ": epoch ", start.epoch, " with ", start.consumed,
                " of its samples done, step ", start.globalStep,
                start.worldSize != world.size()
                    ? str(" (written by ", start.worldSize,
                          " ranks; the rest of the epoch is re-sharded over ", world.size(), ")")
                    : std::string()));
      }
    }
    trainOptions.hostThreads = static_cast<unsigned>(threads);  // GPU: batch gathering
    trainer::Trainer trainer(comm, *model, sgd, *data.train, *data.test, trainOptions);
    printBuckets(trainer.reducer(), o);
    trainer.broadcastParameters();
    if (start.globalStep > 0 || start.epoch > 1) trainer.resumeFrom(start);
    // Steps 6 to 15: past the first, slower steps, and few enough to read.
    constexpr std::size_t kTraceFirstStep = 5, kTraceSteps = 10;
    Trace trace(world.rank());
    if (!o.trace.empty()) trainer.setTrace(&trace, kTraceFirstStep, kTraceSteps);
    installStopHandlers();
    trainer.run(*progress);
    if (trainer.stoppedBy() != 0) {
      log::info(str("stopped by signal ", trainer.stoppedBy(), " after step ", trainer.globalStep(),
                    o.checkpointDir.empty()
                        ? std::string(" (no --checkpoint-dir: nothing saved to resume from)")
                        : str("; resume with --checkpoint-dir ", o.checkpointDir, " --resume")));
    }
    const auto mib = [](std::size_t bytes) {
      return fixed(static_cast<double>(bytes) / (1 << 20), 1);
    };
    log::info(str("memory: peak resident ", mib(peakResidentBytes()),
                  " MiB (VmHWM), proportional now ", mib(proportionalBytes()),
                  " MiB (PSS: shared pages split between the ranks)"));

    comm::agree(comm, [&] {
      if (checkpointWriter) checkpointWriter->finish();  // the last checkpoint is on disk
      if (!o.trace.empty()) {
        const std::string path = str(o.trace, ".rank", world.rank(), ".json");
        trace.write(path);
        log::info(str("wrote trace ", path, world.size() > 1 ? " (and one per other rank)" : ""));
      }
      if (world.rank() == 0 && !o.saveModel.empty()) {
        trainer::saveModel(o.saveModel, *model);
        log::info(str("saved weights to ", o.saveModel));
      }
    });
    return trainer.stoppedBy() != 0 ? 128 + trainer.stoppedBy() : kExitOk;
  } catch (const comm::PeerFailedError& e) {
    log::error(e.what());
    return kExitFailure;
  } catch (const CommError& e) {
    // A collective failed or hung: peers may be blocked, so end the whole job,
    // saying who did not arrive.
    explain(e.what());
    world.abort(kExitFailure);
  } catch (const InternalError& e) {
    log::error(e.what());
    world.abort(kExitFailure);
  } catch (const DeviceError& e) {
    // A CUDA failure on this rank's GPU: the peers may be waiting in NCCL.
    log::error(e.what());
    world.abort(kExitFailure);
  } catch (const Error& e) {
    // A user error this rank raised inside agree(): every rank knows and stops.
    log::error(e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    // Reached only from code outside agree(): the other ranks may be waiting.
    log::error(e.what());
    world.abort(kExitFailure);
  }
}

}  // namespace
}  // namespace ddp::launcher

int main(int argc, char** argv) {
  using namespace ddp;
  const bool rankZero = rankFromEnvironment() == 0;
  launcher::Options options;
  try {
    options = launcher::parseOptions(argc, argv);
  } catch (const UsageError& e) {
    if (rankZero) std::cerr << "ddp_train: " << e.what() << " (see ddp_train --help)\n";
    return kExitUsage;
  }
  if (options.help) {
    if (rankZero) std::cout << launcher::usageText();
    return kExitOk;
  }
  try {
    return launcher::train(options);
  } catch (const std::exception& e) {  // before the job was set up (MPI start-up)
    std::cerr << "ddp_train: " << e.what() << '\n';
    return kExitFailure;
  }
}
