// Checkpoints: everything needed to continue a run exactly where it stopped.
//
// One safetensors file per checkpoint, `checkpoint-<global step>.safetensors`:
//   * the model's parameters under their PyTorch names (layers.0.weight ...),
//     so `safetensors.torch.load_file` gives a state dict PyTorch can load
//     (filter out the optimizer's entries, or load with strict=False);
//   * the optimizer's state as `optimizer.<state>.<name>`, e.g.
//     `optimizer.momentum.layers.0.weight` (absent before the first step:
//     Note [Optimizer state in checkpoints] in trainer/optimizer.h);
//   * the training position and the options that must match on resume, as
//     string metadata (__metadata__).
// The sample order needs no state: it is a function of seed and epoch
// (trainer/distributed_sampler.h), so the position (epoch, samples of the
// epoch already trained on) restores it, for any world size.
//
// Written like --save-model: a temporary file, fsynced, renamed, directory
// fsynced. A crash or kill -9 while writing leaves the temporary file, which
// completeCheckpoints() ignores, and the previous checkpoint intact.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/evaluation.h"
#include "trainer/model_origin.h"
#include "trainer/optimizer.h"
#include "trainer/safetensors.h"
#include "trainer/sequential.h"

namespace ddp::trainer {

// The run's best evaluation so far and the evaluations since
// (launcher/best_evaluation.h, Note [Keeping the best weights]).
struct BestRecord {
  BestMetric metric = BestMetric::kTestLoss;  // what "best" was judged by
  std::size_t step = 0;                       // the global step it was measured after; 0: none yet
  double testLoss = 0.0;
  // NaN in a checkpoint written before the accuracy was recorded (its
  // metric is then the loss).
  double testAccuracy = 0.0;
  std::size_t testSamples = 0;  // 0 in a checkpoint written before it was recorded
  // What --early-stop counts from (Note [How much better counts for
  // --early-stop] in launcher/best_evaluation.h): the step and the metric's
  // value of the last evaluation that beat this reference by more than
  // --early-stop-min-delta; the best one when that is 0. Step 0: none yet,
  // or a checkpoint written before it was recorded (the best stands in).
  std::size_t referenceStep = 0;
  double referenceValue = 0.0;
  // Since the reference (so, with no minimum delta, since the best); all
  // of them while there is none.
  std::size_t evaluationsSince = 0;
};

// Where training stands after a step.
struct TrainPosition {
  std::size_t epoch = 1;       // 1-based, the epoch being trained
  std::size_t consumed = 0;    // samples of that epoch trained on, over all ranks
  std::size_t globalStep = 0;  // steps taken in all
  int worldSize = 1;           // the world that trained them
  double epochLossSum = 0.0;   // this rank's batch losses so far this epoch
  std::size_t epochSteps = 0;  // steps so far this epoch
  // Samples per step over all ranks (batch x micro-batches x world) of the
  // run that wrote it; 0 where a file does not say. It may differ on resume
  // (Note [What may change on resume] in launcher/run_config.h).
  std::size_t globalBatch = 0;
  BestRecord best;  // --save-best, --early-stop
};

// Options recorded with the position; on resume every key listed here must
// have the same value (the caller decides which keys matter).
using CheckpointOptions = std::map<std::string, std::string>;

// "<dir>/checkpoint-<step, 9 digits>.safetensors"
std::string checkpointPath(const std::string& dir, std::size_t globalStep);

// One tensor of a checkpoint, in file order: parameters first, then the
// optimizer state that exists.
struct CheckpointEntry {
  std::string name;  // in the file
  Shape shape;
  // The live tensor (on its device); empty for a sharded optimizer's state
  // that is not gathered (OptimizerState::onShards), which streamState
  // delivers instead.
  const Tensor* tensor = nullptr;
  // Optimizer state: the slot's index in state() (streamState's `slot`).
  std::optional<std::size_t> slot;
};
std::vector<CheckpointEntry> checkpointEntries(Sequential& model, Optimizer& optimizer);
// What a checkpoint holds here: the entries whose tensors are not empty (a
// sharded optimizer's state only on the root of its gatherState())...
std::vector<std::pair<std::string, const Tensor*>> checkpointTensors(Sequential& model,
                                                                     Optimizer& optimizer);
// ... and its metadata: the position and `options`.
std::map<std::string, std::string> checkpointMetadata(const TrainPosition& position,
                                                      const CheckpointOptions& options);

// Writes atomically (see above). Parameters and buffers on a device are
// copied to the host first. Throws DataError if it cannot write.
// CheckpointWriter (trainer/checkpoint_writer.h) does the same in the
// background.
void saveCheckpoint(const std::string& path, Sequential& model, Optimizer& optimizer,
                    const TrainPosition& position, const CheckpointOptions& options);

// Reads and validates the whole file before changing anything (see
// checkCheckpoint); on success, copies values and buffers into `model` and
// `optimizer` (on the parameters' device) and returns the position. Throws
// DataError naming the file and the first problem.
TrainPosition loadCheckpoint(const std::string& path, Sequential& model, Optimizer& optimizer,
                             const CheckpointOptions& expected);

// The same for a checkpoint already read (`path` names it in errors). A job's
// ranks restore with restoreCheckpointFromRoot (trainer/checkpoint_broadcast.h)
// instead, so that only one of them reads the file.
TrainPosition restoreCheckpoint(const std::string& path, const SafetensorsFile& file,
                                Sequential& model, Optimizer& optimizer,
                                const CheckpointOptions& expected);

// What a checkpoint that passed checkCheckpoint holds.
struct CheckedCheckpoint {
  TrainPosition position;
  bool holdsState = false;  // the optimizer's state (all of it), or none
};

// Checks, changing nothing, that `file` (read from `path`) is a checkpoint of
// this run: the model's tensors (names, shapes), the optimizer state (names,
// shapes, all or none: Note [Optimizer state in checkpoints]), the position
// and `expected` options (an option added since the file was written counts
// as its value of then: "optimizer" as sgd, "no-bias-decay" as 0). Throws
// DataError naming the file and the first problem.
CheckedCheckpoint checkCheckpoint(const std::string& path, const SafetensorsFile& file,
                                  Sequential& model, Optimizer& optimizer,
                                  const CheckpointOptions& expected);

// The tensor of optimizer state `slot` in a checked `file` that holds state.
const Tensor& checkpointTensor(const SafetensorsFile& file, const OptimizerState& slot);

// The model's weights in checkpoint `file` (read from `path`), by their
// PyTorch names, views into the file: for writing them out as a model file.
// Checked like loadWeights. Throws DataError.
std::vector<std::pair<std::string, const Tensor*>> checkpointWeights(const std::string& path,
                                                                     const SafetensorsFile& file,
                                                                     Sequential& model);

// What loadWeights read.
struct WeightsSource {
  std::optional<std::size_t> checkpointStep;     // when the file was a ddp checkpoint
  std::optional<ModelOrigin> origin;             // a model file's record of its weights
  std::map<std::string, std::size_t> converted;  // tensors read from F16, BF16, F64
};

// --init-from: the weights of a model file (--save-model, PyTorch's
// safetensors, in any float dtype: Note [Weights in other float types]) or
// of a ddp checkpoint, whose optimizer state and position are left out: a
// new run starts from them. Checked like loadModel (every parameter, nothing
// else but the checkpoint's optimizer state). Throws DataError.
WeightsSource loadWeights(const std::string& path, Sequential& model);

// The complete checkpoints in `dir` (named checkpointPath(), temporary files
// left by a crash excluded), oldest step first.
std::vector<std::string> completeCheckpoints(const std::string& dir);

// Retention (--keep-checkpoints): deletes the complete checkpoints in `dir`
// older than `writtenStep`, the one just written, except the newest
// `keep` - 1 of them, so `keep` remain counting it. Ones with a higher step
// (another run's, in the same directory) and partial files are left alone.
// Call it only once the new checkpoint is durable (saveCheckpoint returned).
// Returns the deleted paths; a file that cannot be deleted is skipped
// (returned in `failed`).
std::vector<std::string> pruneCheckpoints(const std::string& dir, std::size_t writtenStep,
                                          std::size_t keep, std::vector<std::string>* failed);

}  // namespace ddp::trainer
