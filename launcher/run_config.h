// From ddp_train's options to the run's parts: the data, what every rank and
// every checkpoint must agree on, the trainer's options, and the output
// paths checked before training starts.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/consistency.h"
#include "launcher/options.h"
#include "trainer/checkpoint.h"
#include "trainer/dataset.h"
#include "trainer/optimizer.h"
#include "trainer/sequential.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

struct Data {
  std::unique_ptr<trainer::Dataset> train;
  std::unique_ptr<trainer::Dataset> test;
};

// The parameters of the MLP the options build (Fashion-MNIST's shape), and
// those --freeze leaves to train: what the memory and disk checks count
// before (or without) building it.
struct ParameterCount {
  std::size_t total = 0;
  std::size_t trainable = 0;
};
ParameterCount countParameters(const Options& o);

// The optimizer --optimizer names, over `parameters`; with --shard-optimizer
// wrapped in a ShardedOptimizer over `comm` (which moves the trainable
// parameters' values into its buffer: build it after the model is on its
// device).
std::unique_ptr<trainer::Optimizer> buildOptimizer(const Options& o,
                                                   std::vector<trainer::Parameter*> parameters,
                                                   comm::Communicator* comm = nullptr);

// The bytes of optimizer state the run keeps: a copy of the trainable
// parameters for SGD with momentum (else none), two for AdamW (its step count
// aside). For the memory and disk checks.
std::size_t optimizerStateBytes(const Options& o);
// What one rank of `world` keeps of it: 1/world with --shard-optimizer.
std::size_t optimizerStateBytesPerRank(const Options& o, int world);

// The test set of --dataset synthetic: a quarter of the training set's size.
std::size_t syntheticTestSamples(const Options& o);

// The training and test sets --dataset names (both of Fashion-MNIST's shape:
// trainer::kFashionMnistFeatures, kFashionMnistClasses). Throws DataError.
Data loadData(const Options& o);

// --drop-last with more ranks than training samples leaves every rank an
// empty shard: each epoch would have no step and the run would end, exit 0,
// having trained nothing. Throws UsageError naming both counts.
void checkEveryRankTrains(const Options& o, std::size_t trainSamples, int worldSize);

// A step that asks for more samples per rank (--batch-size x --grad-accum)
// than a rank's shard of the training set holds takes the whole shard, so
// the batch the learning rate was chosen for is not what trains: usually
// --batch-size taken for the global batch at a large world size. The
// warning, or nullopt.
std::optional<std::string> batchWarning(const Options& o, std::size_t trainSamples, int worldSize);

// A warm-up (--warmup-steps) as long as the run's `plannedSteps` or longer
// never reaches --lr: the warning, or nullopt.
std::optional<std::string> warmupWarning(const Options& o, std::size_t plannedSteps);

// What every rank must agree on before the first step: the ddp_train build
// (launcher/version.h), each parameter (name, dtype, shape, frozen), each
// option that changes the computation, and the content of the data
// (Dataset::fingerprint: each node reads its own copy).
comm::ConsistencyItems consistencyItems(const Options& o, trainer::Sequential& model,
                                        const Data& data);

// The options a checkpoint records and a resumed run must match (as
// "ddp.option.<name>"): those that change what a step computes, not the
// run's length (--epochs, --max-steps: a run may be extended; with the cosine
// schedule the rate then follows the new plan), the world size (the rest of
// the epoch is re-sharded) or how gradients travel.
trainer::CheckpointOptions checkpointOptions(const Options& o);

// The trainer's options from the command line's; the callbacks (reports,
// checkpoints, the stop signal, faults) and the host threads are the
// caller's to set.
trainer::TrainOptions trainOptionsFrom(const Options& o);

// The file this rank's --trace goes to: PREFIX.rank<N>.json.
std::string tracePath(const Options& o, int rank);

// Rank 0 writes checkpoints and --save-model, every rank its --trace: a
// directory this rank cannot create or a file it cannot write fails at
// start-up, not after the run whose result it would hold. Throws DataError.
void checkOutputPaths(const Options& o, int rank);

// A new run (no --resume) into a --checkpoint-dir that holds an earlier
// run's checkpoints would overwrite those of the same step numbers, and
// leave two runs mixed in one directory, where --resume and
// --keep-checkpoints go by step number alone. Rank 0, once it holds the
// directory (Note [One run per checkpoint directory]); throws DataError
// naming the newest and how to go on.
void checkNoEarlierRun(const Options& o);

}  // namespace ddp::launcher
