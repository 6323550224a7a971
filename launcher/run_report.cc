#include "launcher/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "launcher/launcher_checks.h"
#include "launcher/run_end.h"
#include "runtime/log.h"
#include "runtime/memory.h"
#include "trainer/blas_kernels.h"
#include "trainer/checkpoint.h"

namespace ddp::launcher {
namespace {

// A cap in MiB as --bucket-cap-mb spells it ("inf" for one bucket).
std::string mib(std::size_t cap) {
  return cap == comm::kSingleBucket ? std::string("inf")
                                    : fixed(static_cast<double>(cap) / (1 << 20), 0);
}

}  // namespace

void printSummary(const World& world, const comm::Communicator& comm, const Options& o,
                  const ThreadCount& threads, const Placement& placement,
                  trainer::Sequential& model, const Data& data) {
  const std::size_t params = model.parameterCount();
  const std::string device =
      placement.device == trainer::Device::kCuda
          ? placement.summary
          : str("cpu (", threads.threads, " BLAS thread", threads.threads > 1 ? "s" : "",
                " per rank", threads.source.empty() ? std::string() : ", from " + threads.source,
                "), ", trainer::describe(trainer::blasKernels()));
  // "2 per node", or "3+1 per node" when the nodes differ.
  std::vector<std::size_t> perNode;
  for (const NodeLayout& node : world.nodes())
    perNode.push_back(node.ranks.size());
  const bool even = std::all_of(perNode.begin(), perNode.end(),
                                [&](std::size_t n) { return n == perNode.front(); });
  log::info(str("ddp_train: ", world.size(), " rank", world.size() > 1 ? "s" : "", " on ",
                world.nodeCount(), " node", world.nodeCount() > 1 ? "s" : "", " (",
                even ? str(perNode.front()) : join(perNode, "+"), " per node), launcher ",
                launcherName(world.launcher()), ", backend ", comm.describe(), ", device ",
                device));
  if (world.nodeCount() > 1) log::info(str("nodes: ", describeNodes(world.nodes())));
  log::info(str("model ", o.model, ": ", model.describe(), ": ", params, " parameters (",
                fixed(static_cast<double>(params) * 4 / (1 << 20), 1), " MiB)"));
  // --eval-samples: the part of the test set evaluated.
  const std::string evaluated = o.evalSamples > 0 && o.evalSamples < data.test->size()
                                    ? str(" (evaluated: the first ", o.evalSamples, ")")
                                    : std::string();
  if (o.evaluate) {  // Note [Evaluating without training] in launcher/evaluate.h
    log::info(str("data ", data.test->name(), " ", data.test->size(), " samples", evaluated,
                  ", shared by ", world.size(), " rank", world.size() > 1 ? "s" : "",
                  "; --evaluate: no training"));
    return;
  }
  log::info(str(
      "data ", data.train->name(), " ", data.train->size(), " samples, ", data.test->name(), " ",
      data.test->size(), evaluated, "; global batch ", describeGlobalBatch(o, world.size()),
      ", lr ", o.lr, " (", o.lrSchedule, o.minLr > 0 ? str(" to ", o.minLr) : std::string(),
      o.lrDecaySteps > 0 ? str(" over ", o.lrDecaySteps, " steps") : std::string(),
      o.warmupSteps > 0 ? str(", ", o.warmupSteps, " warm-up steps") : std::string(), "), ",
      o.optimizer == "adamw" ? str("adamw (betas ", o.beta1, ", ", o.beta2, ", eps ", o.eps, ")")
                             : str("sgd (momentum ", o.momentum, ")"),
      ", weight decay ", o.weightDecay, o.noBiasDecay ? " (not on biases)" : "",
      o.shardOptimizer ? str(", state sharded over ", world.size(), " ranks") : std::string(),
      o.clipGradNorm == 0          ? std::string()
      : std::isinf(o.clipGradNorm) ? ", gradient norm measured (not clipped)"
                                   : str(", gradient norm clipped to ", o.clipGradNorm),
      ", seed ", o.seed));
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
      o.gradCompression == "bf16" ? ", sent as bfloat16" : "",
      reducer.scatters() ? ", reduce-scattered: each rank receives the part it updates" : ""));
}

std::string capName(std::size_t cap) {
  if (cap == comm::kSingleBucket) return "one bucket";
  return str(fixed(static_cast<double>(cap) / (1 << 20), 0), " MiB");
}

void reportInitFrom(const std::string& path, const trainer::WeightsSource& source) {
  if (source.checkpointStep) {
    log::info(str("init-from: the weights of checkpoint ", path, " (step ", *source.checkpointStep,
                  "); a new run starts from them without its optimizer state and position "
                  "(--resume FILE continues that run instead)"));
  }
  if (source.origin)
    log::info(str("init-from: ", path, " holds ", trainer::originText(*source.origin)));
  for (const auto& [dtype, tensors] : source.converted) {
    log::info(str("init-from: ", tensors, " tensor", tensors == 1 ? "" : "s", " of ", path,
                  " converted from ", dtype, " to float32"));
  }
}

trainer::CheckpointWriter::WrittenHandler reportCheckpoint(const Options& o) {
  return [&o](const std::string& path, const trainer::TrainPosition& at) {
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
  };
}

// Rank 0's warnings about how the job was placed: idle CPUs, more BLAS
// threads than CPUs, and (mpirun across nodes) a daemon keepalive that would
// find a lost node only after --timeout.
void reportBucketCapChoice(std::size_t cap, const std::vector<std::size_t>& caps,
                           const std::vector<double>& medians, std::size_t steps) {
  std::vector<std::string> tried;
  for (std::size_t i = 0; i < caps.size(); ++i)
    tried.push_back(str(capName(caps[i]), ": ", fixed(medians[i] * 1e3, 2), " ms"));
  log::info(str("reducer: bucket cap auto chose ", capName(cap),
                " (median step of the slowest rank: ", join(tried, ", "), "; ", steps,
                " steps of tuning)"));
}

void warnAboutPlacement(const World& world, const Options& o, const CpuShare& cpus, int threads) {
  if (auto warning = idleCpuWarning(cpus, threads, world.localSize(), world.launcher())) {
    log::warn(*warning);
  }
  if (auto warning = threadsWarning(threads, cpus)) log::warn(*warning);
  if (world.launcher() == Launcher::kMpirun && world.nodeCount() > 1) {
    // Note [Lost nodes under mpirun]
    const auto warning = keepaliveWarning(keepaliveFromEnvironment(std::getenv), o.timeoutSeconds,
                                          o.stallWarningSeconds);
    if (warning) log::warn(*warning);
  }
}

// How the run ended: a stop by signal (and how to resume), and its memory.
void reportRunEnd(const trainer::Trainer& trainer, const Options& o, const TimeLimit* timeLimit) {
  const std::string resume =
      o.checkpointDir.empty()
          ? std::string(" (no --checkpoint-dir: nothing saved to resume from)")
          : str("; resume with --checkpoint-dir ", o.checkpointDir, " --resume");
  if (trainer.stoppedBy() != 0) {
    log::info(str("stopped by ", signalName(trainer.stoppedBy()), " (signal ", trainer.stoppedBy(),
                  ") after step ", trainer.globalStep(), resume));
  } else if (trainer.stoppedByTimeLimit() && timeLimit != nullptr) {
    log::info(str("stopped by --time-limit after step ", trainer.globalStep(), " of ",
                  trainer.plannedSteps(), ": ", timeLimit->stopText(), resume));
  }
  const auto mib = [](std::size_t bytes) {
    return fixed(static_cast<double>(bytes) / (1 << 20), 1);
  };
  log::info(str("memory: peak resident ", mib(peakResidentBytes()),
                " MiB (VmHWM), proportional now ", mib(proportionalBytes()),
                " MiB (PSS: shared pages split between the ranks)"));
}

}  // namespace ddp::launcher
