#include "launcher/run_config.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "comm/reducer.h"
#include "launcher/version.h"
#include "runtime/error.h"
#include "trainer/adamw.h"
#include "trainer/distributed_sampler.h"
#include "trainer/fashion_mnist.h"
#include "trainer/lr_schedule.h"
#include "trainer/mlp.h"
#include "trainer/safetensors.h"
#include "trainer/sgd.h"
#include "trainer/sharded_optimizer.h"
#include "trainer/synthetic_dataset.h"

namespace ddp::launcher {
namespace {

// --bucket-cap-mb at or above this (or inf): one bucket, no overlap.
constexpr double kSingleBucketMb = 1 << 20;

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
          {"min-lr", str(o.minLr)},
          {"optimizer", o.optimizer == "adamw"
                            ? str("adamw betas ", o.beta1, ",", o.beta2, " eps ", o.eps)
                            : o.optimizer},
          {"momentum", str(o.momentum)},
          {"weight-decay", str(o.weightDecay)},
          {"no-bias-decay", str(o.noBiasDecay)},
          {"seed", str(o.seed)},
          {"no-shuffle", str(o.noShuffle)},
          {"drop-last", str(o.dropLast)}};
}

std::unique_ptr<trainer::Optimizer> buildUnsharded(const Options& o,
                                                   std::vector<trainer::Parameter*> parameters) {
  const auto lr = static_cast<float>(o.lr), decay = static_cast<float>(o.weightDecay);
  if (o.optimizer == "adamw") {
    return std::make_unique<trainer::AdamW>(
        std::move(parameters),
        trainer::AdamWOptions{lr, static_cast<float>(o.beta1), static_cast<float>(o.beta2),
                              static_cast<float>(o.eps), decay, !o.noBiasDecay});
  }
  return std::make_unique<trainer::Sgd>(
      std::move(parameters),
      trainer::SgdOptions{lr, static_cast<float>(o.momentum), decay, false, !o.noBiasDecay});
}

// Copies of the trainable parameters the optimizer keeps as state.
std::size_t optimizerStateCopies(const Options& o) {
  return o.optimizer == "adamw" ? 2 : o.momentum > 0 ? 1 : 0;
}

}  // namespace

std::unique_ptr<trainer::Optimizer> buildOptimizer(const Options& o,
                                                   std::vector<trainer::Parameter*> parameters,
                                                   comm::Communicator* comm) {
  if (!o.shardOptimizer) return buildUnsharded(o, std::move(parameters));
  DDP_CHECK(comm != nullptr, "a sharded optimizer needs its communicator");
  return std::make_unique<trainer::ShardedOptimizer>(*comm, std::move(parameters),
                                                     [&o](std::vector<trainer::Parameter*> slices) {
                                                       return buildUnsharded(o, std::move(slices));
                                                     });
}

std::size_t optimizerStateBytes(const Options& o) {
  return optimizerStateCopies(o) * countParameters(o).trainable * sizeof(float);
}

std::size_t optimizerStateBytesPerRank(const Options& o, int world) {
  if (!o.shardOptimizer) return optimizerStateBytes(o);
  const auto ranks = static_cast<std::size_t>(world);
  // Note [Sharded optimizer state]: ceil(trainable / world) per kind of state.
  const std::size_t shard = (countParameters(o).trainable + ranks - 1) / ranks;
  return optimizerStateCopies(o) * shard * sizeof(float);
}

ParameterCount countParameters(const Options& o) {
  const std::vector<std::size_t> layers = trainer::mlpParameterCounts(
      trainer::kFashionMnistFeatures, o.hidden, trainer::kFashionMnistClasses);
  ParameterCount count;
  for (std::size_t layer = 0; layer < layers.size(); ++layer) {
    count.total += layers[layer];
    const bool frozen =
        std::find(o.freezeLayers.begin(), o.freezeLayers.end(), layer) != o.freezeLayers.end();
    if (!frozen) count.trainable += layers[layer];
  }
  return count;
}

std::size_t syntheticTestSamples(const Options& o) {
  return std::max<std::size_t>(1, o.syntheticSamples / 4);
}

Data loadData(const Options& o) {
  if (o.dataset == "synthetic") {
    // Fashion-MNIST's shape, so either set trains the same model.
    const std::size_t features = trainer::kFashionMnistFeatures;
    const std::size_t classes = trainer::kFashionMnistClasses;
    return {o.evaluate ? nullptr
                       : std::make_unique<trainer::SyntheticDataset>(o.syntheticSamples, features,
                                                                     classes, o.seed, 0),
            std::make_unique<trainer::SyntheticDataset>(syntheticTestSamples(o), features, classes,
                                                        o.seed, 1)};
  }
  return {o.evaluate ? nullptr : trainer::loadFashionMnist(o.dataDir, trainer::Split::kTrain),
          trainer::loadFashionMnist(o.dataDir, trainer::Split::kTest)};
}

void checkEveryRankTrains(const Options& o, std::size_t trainSamples, int worldSize) {
  if (!o.dropLast || trainSamples >= static_cast<std::size_t>(worldSize)) return;
  throw UsageError(str("--drop-last: the ", trainSamples, " training samples do not give each of ",
                       worldSize, " ranks one, so an epoch would have no step (without ",
                       "--drop-last the last round is padded with repeats)"));
}

void checkEvalSamples(const Options& o, const trainer::Dataset& test) {
  if (o.evalSamples <= test.size()) return;
  throw UsageError(str("--eval-samples ", o.evalSamples, " is more than the ", test.size(),
                       " samples of the test set ", test.name(), " (0: all of them)"));
}

std::optional<std::string> batchWarning(const Options& o, std::size_t trainSamples, int worldSize) {
  const std::size_t shard =
      trainer::DistributedSampler(trainSamples, worldSize, 0, {false, o.dropLast, 0})
          .samplesPerRank();
  const std::size_t perStep = o.batchSize * o.gradAccum;
  if (perStep <= shard) return std::nullopt;
  return str(
      "--batch-size ", o.batchSize,
      o.gradAccum > 1 ? str(" x --grad-accum ", o.gradAccum) : std::string(), " asks for ", perStep,
      " samples per rank per step, but ",
      worldSize == 1 ? std::string("the one rank") : str("each of the ", worldSize, " ranks"),
      " gets ", shard, " of the ", trainSamples,
      " training samples per epoch: every step takes the whole shard, ", shard,
      " samples, not the batch asked for (--batch-size counts samples per rank; the "
      "global batch is that times the ranks)");
}

std::optional<std::string> warmupWarning(const Options& o, std::size_t plannedSteps) {
  if (o.warmupSteps == 0 || o.warmupSteps < plannedSteps) return std::nullopt;
  return str(
      "--warmup-steps ", o.warmupSteps, " covers the whole run of ", plannedSteps,
      " steps: the learning rate never reaches --lr ", o.lr, " (the last step runs at ",
      trainer::learningRateAt(trainer::LrSchedule::kConstant, o.lr,
                              plannedSteps > 0 ? plannedSteps - 1 : 0, plannedSteps, o.warmupSteps),
      ")");
}

std::optional<std::string> lrDecayWarning(const Options& o, std::size_t plannedSteps) {
  if (o.lrDecaySteps == 0 || o.lrDecaySteps >= plannedSteps || o.minLr > 0) return std::nullopt;
  return str("--lr-decay-steps ", o.lrDecaySteps, " ends the fall to --min-lr 0 before the run's ",
             plannedSteps, " steps: its last ", plannedSteps - o.lrDecaySteps,
             " steps run at a learning rate of 0 and change nothing (give --min-lr, or "
             "--max-steps ",
             o.lrDecaySteps, ")");
}

comm::ConsistencyItems consistencyItems(const Options& o, trainer::Sequential& model,
                                        const Data& data) {
  comm::ConsistencyItems items = {{"ddp_train version", ddpVersion()}};
  for (const trainer::Dataset* set : {data.train.get(), data.test.get()}) {
    if (set == nullptr) continue;  // --evaluate's training set
    items.emplace_back(
        str("data ", set->name(), o.dataset == "synthetic" ? "" : " (the files in --data-dir)"),
        set->fingerprint());
  }
  for (trainer::Parameter* p : model.parameters()) {
    items.emplace_back(
        str("parameter ", p->name),
        str("float32 ", trainer::shapeString(p->value.shape()), p->trainable ? "" : " frozen"));
  }
  std::vector<std::pair<std::string, std::string>> options = computationOptions(o);
  options.insert(options.end(), {{"grad-compression", o.gradCompression},
                                 {"two-level-allreduce", o.twoLevelAllreduce},
                                 {"bucket-cap-mb", o.bucketCapAuto ? "auto" : str(o.bucketCapMb)},
                                 {"epochs", str(o.epochs)},
                                 {"warmup-steps", str(o.warmupSteps)},
                                 {"lr-decay-steps", str(o.lrDecaySteps)},
                                 // each --metrics-every line costs every rank an all-reduce
                                 {"metrics-every", str(o.metricsEvery)},
                                 {"eval-samples", str(o.evalSamples)},
                                 {"clip-grad-norm", str(o.clipGradNorm)},
                                 {"max-steps", str(o.maxSteps)},
                                 {"time-limit", str(o.timeLimitSeconds)},
                                 {"shard-optimizer", str(o.shardOptimizer)},
                                 {"keep-subnormals", str(o.keepSubnormals)},
                                 {"device", o.device},
                                 {"evaluate", str(o.evaluate)},
                                 // each --save-best write is a collective
                                 {"save-best", str(!o.saveBest.empty())},
                                 {"early-stop", str(o.earlyStop)},
                                 {"early-stop-min-delta", str(o.earlyStopMinDelta)},
                                 {"best-metric", o.bestMetric}});
  for (const auto& [name, value] : options)
    items.emplace_back(str("option --", name), value);
  return items;
}

std::size_t globalBatch(const Options& o, int worldSize) {
  return o.batchSize * o.gradAccum * static_cast<std::size_t>(worldSize);
}

std::string describeGlobalBatch(const Options& o, int worldSize) {
  return str(globalBatch(o, worldSize), " (",
             o.gradAccum > 1 ? str(o.gradAccum, " micro-batches of ") : std::string(), o.batchSize,
             " per rank x ", worldSize, ")");
}

std::optional<std::string> applyGlobalBatch(Options& o, int worldSize) {
  if (o.globalBatch == 0) return std::nullopt;
  const std::size_t round = o.batchSize * static_cast<std::size_t>(worldSize);
  if (o.globalBatch % round != 0) {
    const std::size_t below = o.globalBatch / round * round;
    return str("--global-batch ", o.globalBatch, " cannot be shared by ", worldSize, " rank",
               worldSize == 1 ? "" : "s", " of --batch-size ", o.batchSize,
               ": it must be a multiple of ", round, " (", o.batchSize, " x ", worldSize,
               "), e.g. ", below > 0 ? str(below, " or ") : std::string(), below + round);
  }
  o.gradAccum = o.globalBatch / round;
  return std::nullopt;
}

trainer::CheckpointOptions checkpointOptions(const Options& o) {
  trainer::CheckpointOptions recorded;
  for (const auto& [name, value] : computationOptions(o))
    recorded.emplace("ddp.option." + name, value);
  return recorded;
}

trainer::CheckpointOptions resumeOptions(const Options& o) {
  trainer::CheckpointOptions mustMatch = checkpointOptions(o);
  for (const char* shape : {"ddp.option.batch-size", "ddp.option.grad-accum"})
    mustMatch.erase(shape);
  return mustMatch;
}

trainer::TrainOptions trainOptionsFrom(const Options& o) {
  trainer::TrainOptions t;
  t.epochs = o.epochs;
  t.maxSteps = o.maxSteps;
  t.batchSize = o.batchSize;
  t.evalBatchSize = o.evalBatchSize;
  t.evalSamples = o.evalSamples;
  t.evalEvery = o.evalEvery;
  t.gradAccum = o.gradAccum;
  t.compression =
      o.gradCompression == "bf16" ? comm::GradCompression::kBf16 : comm::GradCompression::kNone;
  t.bucketCapBytes = o.bucketCapMb >= kSingleBucketMb
                         ? comm::kSingleBucket
                         : static_cast<std::size_t>(o.bucketCapMb * (1 << 20));
  t.firstBucketBytes = std::size_t{1} << 20;  // or the cap, if smaller
  t.autoBucketCap = o.bucketCapAuto;
  t.lrSchedule = trainer::parseLrSchedule(o.lrSchedule);
  t.warmupSteps = o.warmupSteps;
  t.minLr = o.minLr;
  t.lrDecaySteps = o.lrDecaySteps;
  t.sampler = {!o.noShuffle, o.dropLast, o.seed};
  t.lossReadEvery = o.logEvery;
  t.lossWindow = o.metricsEvery;
  t.paceWindowSeconds = o.paceCheckSeconds;
  t.checkpointEvery = o.checkpointEvery;
  t.skipNonFinite = o.skipNonFinite;
  t.clipGradNorm = static_cast<float>(o.clipGradNorm);
  return t;
}

std::string tracePath(const Options& o, int rank) {
  return str(o.trace, ".rank", rank, ".json");
}

void checkNoEarlierRun(const Options& o) {
  if (o.checkpointDir.empty() || !o.resume.empty()) return;
  const std::vector<std::string> earlier = trainer::completeCheckpoints(o.checkpointDir);
  if (earlier.empty()) return;
  throw DataError(str(
      "--checkpoint-dir ", o.checkpointDir, " holds ", earlier.size(),
      earlier.size() == 1 ? " checkpoint" : " checkpoints",
      " of an earlier run (the newest: ", std::filesystem::path(earlier.back()).filename().string(),
      "), and this run does not --resume: its checkpoints would overwrite those "
      "of the same steps and mix two runs in one directory. Continue that run "
      "with --resume, or start this one in another directory (or move those "
      "files away first)"));
}

void checkOutputPaths(const Options& o, int rank) {
  // --evaluate writes no trace and no checkpoint, and only reads the
  // directory (Note [Evaluating without training] in launcher/evaluate.h).
  if (!o.trace.empty() && !o.evaluate) {
    try {
      trainer::checkCanSave(tracePath(o, rank));
    } catch (const DataError& e) {
      throw DataError(str("--trace: ", e.what()));
    }
  }
  if (rank != 0) return;
  if (!o.checkpointDir.empty() && !o.evaluate) {
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
  if (!o.saveModel.empty()) {
    try {
      trainer::checkCanSave(o.saveModel);
    } catch (const DataError& e) {
      throw DataError(str("--save-model: ", e.what()));
    }
  }
  if (!o.saveBest.empty()) {
    try {
      trainer::checkCanSave(o.saveBest);
    } catch (const DataError& e) {
      throw DataError(str("--save-best: ", e.what()));
    }
  }
}

}  // namespace ddp::launcher
