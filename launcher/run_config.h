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
  std::unique_ptr<trainer::Dataset> train;  // null under --evaluate, which never reads it
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
// trainer::kFashionMnistFeatures, kFashionMnistClasses); under --evaluate
// the test set alone. Throws DataError.
Data loadData(const Options& o);

// --drop-last with more ranks than training samples leaves every rank an
// empty shard: each epoch would have no step and the run would end, exit 0,
// having trained nothing. Throws UsageError naming both counts.
void checkEveryRankTrains(const Options& o, std::size_t trainSamples, int worldSize);

// --eval-samples larger than the test set would quietly evaluate less than
// asked: throws UsageError naming both counts.
void checkEvalSamples(const Options& o, const trainer::Dataset& test);

// A step that asks for more samples per rank (--batch-size x --grad-accum)
// than a rank's shard of the training set holds takes the whole shard, so
// the batch the learning rate was chosen for is not what trains: usually
// --batch-size taken for the global batch at a large world size. The
// warning, or nullopt.
std::optional<std::string> batchWarning(const Options& o, std::size_t trainSamples, int worldSize);

// A warm-up (--warmup-steps) as long as the run's `plannedSteps` or longer
// never reaches --lr: the warning, or nullopt.
std::optional<std::string> warmupWarning(const Options& o, std::size_t plannedSteps);

// A fall (--lr-decay-steps) that ends before the run's `plannedSteps` with
// no --min-lr leaves the steps after it at a rate of 0, which change no
// weight: the warning, or nullopt.
std::optional<std::string> lrDecayWarning(const Options& o, std::size_t plannedSteps);

// What every rank must agree on before the first step: the ddp_train build
// (launcher/version.h), each parameter (name, dtype, shape, frozen), each
// option that changes the computation, and the content of the data
// (Dataset::fingerprint: each node reads its own copy).
comm::ConsistencyItems consistencyItems(const Options& o, trainer::Sequential& model,
                                        const Data& data);

// Note [What may change on resume]
// A checkpoint records the options that change what a step computes (as
// "ddp.option.<name>"); a resumed run must match all of them but the batch's
// shape. Free to change are:
//   - the run's length (--epochs, --max-steps: a run may be extended; with
//     the cosine schedule the rate then follows the new plan), --warmup-steps,
//     --clip-grad-norm and --keep-subnormals, and how gradients travel;
//   - the world size: the rest of the interrupted epoch is re-sharded over
//     the new ranks (DistributedSampler::remainingIndices), its position
//     being counted in samples, not steps;
//   - --batch-size and --grad-accum, for the same reason. They are what
//     lets a job moved to another number of ranks keep its global batch
//     (batch x micro-batches x ranks), as Megatron-Core keeps
//     --global-batch-size: 4 ranks of 16 go on as 2 ranks of 32, or as 2
//     ranks of 16 with --grad-accum 2 where memory holds only 16, and train
//     what the uninterrupted run would have, within float rounding
//     (--global-batch does the sum: applyGlobalBatch). Keeping
//     the per-rank batch instead changes the global batch with the world
//     size. Either way the resume line says when the global batch differs
//     from the checkpoint's (TrainPosition::globalBatch).
// Learning rate and schedule stay as they were: ddp does not rescale --lr
// for a new global batch, which is the user's call.

// Samples per optimizer step over all ranks: --batch-size x --grad-accum x
// the world size.
std::size_t globalBatch(const Options& o, int worldSize);
// That number and its factors, as the start-up and resume lines print it:
// "64 (32 per rank x 2)", "128 (2 micro-batches of 16 per rank x 4)".
std::string describeGlobalBatch(const Options& o, int worldSize);

// --global-batch N: sets o.gradAccum to N / (--batch-size x worldSize), or
// returns why it cannot (N is not a multiple of that). Without it, nothing.
std::optional<std::string> applyGlobalBatch(Options& o, int worldSize);

// The options a checkpoint records (Note [What may change on resume]).
trainer::CheckpointOptions checkpointOptions(const Options& o);

// The recorded options a resumed run must match: checkpointOptions without
// --batch-size and --grad-accum (Note [What may change on resume]).
trainer::CheckpointOptions resumeOptions(const Options& o);

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
