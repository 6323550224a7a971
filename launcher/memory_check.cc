#include "launcher/memory_check.h"

#include <algorithm>
#include <numeric>

#include "launcher/run_config.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "trainer/fashion_mnist.h"
#include "trainer/mlp.h"

namespace ddp::launcher {

HostMemoryNeed hostMemoryNeed(const Options& o, trainer::Device device, bool rankZero, int world) {
  const std::size_t inputDim = trainer::kFashionMnistFeatures;
  const std::size_t classes = trainer::kFashionMnistClasses;
  const ParameterCount count = countParameters(o);
  HostMemoryNeed need;
  need.parameters = count.total;
  need.weights = need.parameters * sizeof(float);
  if (device == trainer::Device::kCpu) {
    // --evaluate builds no optimizer and no Reducer (Note [Evaluating
    // without training] in launcher/evaluate.h).
    if (!o.evaluate) {
      need.gradients = count.trainable * sizeof(float);
      need.optimizerState = optimizerStateBytesPerRank(o, world);
    }
    const std::size_t widths =
        std::accumulate(o.hidden.begin(), o.hidden.end(), std::size_t{0}) + classes;
    // For the largest batch a forward takes: the test set's at each epoch's
    // end (and all of --evaluate's), or a training micro-batch.
    const std::size_t rows = o.evaluate ? o.evalBatchSize : std::max(o.batchSize, o.evalBatchSize);
    need.outputs = rows * widths * sizeof(float);
  }
  // The copy checkpoints are written from; sharded, the state gathered from
  // every rank is that copy's state (Note [Checkpoints written in the
  // background]). The file resumed from holds the same bytes.
  if (rankZero && !o.checkpointDir.empty() && !o.evaluate) {
    need.checkpointCopy = need.weights + optimizerStateBytes(o);
  }
  if (rankZero && !o.resume.empty()) need.resumedFile = need.weights + optimizerStateBytes(o);
  if (o.dataset == "synthetic") {
    const std::size_t samples = (o.evaluate ? 0 : o.syntheticSamples) + syntheticTestSamples(o);
    need.data = samples * (inputDim * sizeof(float) + sizeof(std::int32_t));
  }
  return need;
}

std::optional<std::string> memoryShortfall(const HostMemoryNeed& need, int ranks,
                                           std::size_t available, const std::string& host) {
  const double total = static_cast<double>(need.total()) * ranks + need.checkpointCopy;
  if (total <= static_cast<double>(available)) return std::nullopt;
  const auto bytes = [](std::size_t n) { return bytesString(static_cast<double>(n)); };
  std::string parts = str(bytes(need.weights), " of weights");
  if (need.gradients > 0) parts += str(", ", bytes(need.gradients), " of gradients");
  if (need.optimizerState > 0)
    parts += str(", ", bytes(need.optimizerState), " of optimizer state");
  if (need.outputs > 0) parts += str(", ", bytes(need.outputs), " of layer outputs");
  if (need.data > 0) parts += str(", ", bytes(need.data), " of synthetic data");
  return str("out of memory: host ", host, " cannot hold this run: each of its ", ranks, " rank",
             ranks == 1 ? "" : "s", " needs at least ", bytes(need.total()), " (",
             fixed(static_cast<double>(need.parameters) / 1e6, 2), " M parameters: ", parts, "), ",
             need.checkpointCopy > 0
                 ? str("and rank 0 ", bytes(need.checkpointCopy),
                       " more for the copy of the weights and optimizer state that checkpoints are "
                       "written from, ")
                 : std::string(),
             bytesString(total), " in all, and ", bytes(available),
             " is available (MemAvailable plus free swap, or a cgroup limit's room); the kernel "
             "would end the run part-way (try a smaller model, batch or data set, or fewer ranks "
             "per node",
             need.checkpointCopy > 0
                 ? ", or checkpoints without the copy: --checkpoint-staging direct"
                 : "",
             ")");
}

std::optional<std::string> processLimitShortfall(const HostMemoryNeed& need, trainer::Device device,
                                                 const ProcessMemoryLimit& limit,
                                                 const std::string& host) {
  const std::size_t blas = device == trainer::Device::kCpu ? kBlasBufferBytes : 0;
  // The resumed file is unmapped before the copy exists.
  const bool mapping = need.resumedFile > need.checkpointCopy;
  const std::size_t rankZero = mapping ? need.resumedFile : need.checkpointCopy;
  const std::size_t run = need.total() + rankZero;  // this rank's
  if (run + blas <= limit.room()) return std::nullopt;
  const auto bytes = [](std::size_t n) { return bytesString(static_cast<double>(n)); };
  return str(
      "out of memory: on host ", host, ", ", limit.name, " limits each rank's ", limit.what, " to ",
      bytes(limit.limit), "; ", bytes(limit.used),
      " of it is in use before the model is built (MPI, the libraries, thread stacks), "
      "and a rank needs at least ",
      bytes(run + blas), " more (", bytes(run), " for the run",
      rankZero > 0
          ? str(", of which ", bytes(rankZero), " is rank 0's ",
                mapping ? "mapping of the checkpoint it resumes from" : "copy for checkpoints",
                blas > 0 ? "," : "")
          : std::string(),
      blas > 0 ? str(" and ", bytes(blas), " for OpenBLAS's work buffer") : std::string(),
      "), but ", bytes(limit.room()), " is left",
      blas > 0 && limit.room() >= run ? " (OpenBLAS would spin for ever trying to map its buffer)"
                                      : "",
      "; raise the limit (", limit.name, " unlimited, or the batch system's setting)",
      rankZero > 0 && !mapping
          ? ", or write checkpoints without the copy (--checkpoint-staging direct)"
          : "");
}

std::optional<std::string> processLimitWarning(const ProcessMemoryLimit& limit,
                                               const std::string& host) {
  if (limit.room() >= kMpiStartBytes) return std::nullopt;
  return str("on host ", host, ", ", limit.name, " leaves each rank ",
             bytesString(static_cast<double>(limit.room())), " of its ", limit.what,
             " before MPI starts, and MPI's start-up and the rank's threads take about ",
             bytesString(static_cast<double>(kMpiStartBytes)),
             ": if MPI_Init fails, crashes or hangs below, raise the limit (", limit.name,
             " unlimited, or the batch system's setting)");
}

StagingChoice chooseStaging(const std::string& option, const HostMemoryNeed& need, int ranks,
                            std::optional<std::size_t> available,
                            const std::optional<ProcessMemoryLimit>& limit, trainer::Device device,
                            bool sharded, int cpus) {
  using trainer::CheckpointStaging;
  // No copy to place (another rank, or no checkpoints): nothing to choose.
  if (need.checkpointCopy == 0 || option == "copy") return {CheckpointStaging::kCopy};
  if (option == "direct") return {CheckpointStaging::kDirect};
  if (sharded) return {CheckpointStaging::kDirect, StagingReason::kSharded};
  // The same checks as the refusals', against a tenth less room.
  const auto spared = [](std::size_t room) {
    return room - static_cast<std::size_t>(static_cast<double>(room) * kStagingSpareFraction);
  };
  const bool nodeHasRoom = !available || !memoryShortfall(need, ranks, spared(*available), "");
  std::optional<ProcessMemoryLimit> tighter = limit;
  if (tighter) tighter->used += tighter->room() - spared(tighter->room());
  const bool limitHasRoom = !tighter || !processLimitShortfall(need, device, *tighter, "");
  if (!nodeHasRoom || !limitHasRoom)
    return {CheckpointStaging::kDirect, StagingReason::kNoRoom, need.checkpointCopy};
  if (device == trainer::Device::kCpu && cpus == 1)
    return {CheckpointStaging::kDirect, StagingReason::kOneCpu, need.checkpointCopy};
  return {CheckpointStaging::kCopy, StagingReason::kCopyFits};
}

std::optional<std::string> stagingNotice(const StagingChoice& choice, const std::string& host) {
  const bool noRoom = choice.reason == StagingReason::kNoRoom;
  if (!noRoom && choice.reason != StagingReason::kOneCpu) return std::nullopt;
  const std::string why =
      noRoom
          ? str("host ", host,
                " or its process limit has no room for one beside the run (--checkpoint-staging)")
          : std::string(
                "rank 0 may run on one CPU only, where a thread writing a copy out "
                "would take its time from the steps (--checkpoint-staging copy keeps "
                "the copy)");
  return str("checkpoint: rank 0 writes checkpoints into their files between steps, without a ",
             bytesString(static_cast<double>(choice.copyBytes)), " copy: ", why);
}

StagingChoice checkNodeMemory(const Options& o, const World& world, trainer::Device device,
                              const CpuShare& cpus) {
  if (world.localRank() != 0) return {};  // one report per node
  // Rank 0 is its node's local rank 0 (World orders the node by global rank).
  HostMemoryNeed need = hostMemoryNeed(o, device, world.rank() == 0, world.size());
  const std::optional<std::size_t> available = availableBytes();
  const std::optional<ProcessMemoryLimit> limit = processMemoryLimit();
  const StagingChoice choice =
      chooseStaging(o.checkpointStaging, need, world.localSize(), available, limit, device,
                    o.shardOptimizer, cpus.allowed);
  if (choice.staging == trainer::CheckpointStaging::kDirect) need.checkpointCopy = 0;
  if (available) {
    const auto shortfall = memoryShortfall(need, world.localSize(), *available, world.hostname());
    if (shortfall) throw Error(*shortfall);  // Note [Usage errors after start-up]
  }
  if (limit) {  // Note [A process memory limit]
    const auto shortfall = processLimitShortfall(need, device, *limit, world.hostname());
    if (shortfall) throw Error(*shortfall);  // Note [Usage errors after start-up]
  }
  return choice;
}

}  // namespace ddp::launcher
