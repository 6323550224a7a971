// Optimizer: turns the averaged gradients into an update of the parameters.
//
// Contract (called on the training thread, once per step, after the Reducer
// has finished: every rank holds the same gradients bit for bit, so every
// rank's update is the same and the replicas stay identical):
//   step(inputs)       updates every trainable parameter from its gradient;
//                      frozen parameters keep their values and have no state.
//   setLearningRate()  from the next step on (the schedule calls it; the
//                      trainer takes the optimizer's rate as the peak).
//   state()            the tensors an exact resume needs (Note [Optimizer
//                      state in checkpoints]).
// Implementations: Sgd (trainer/sgd.h), AdamW (trainer/adamw.h). Both follow
// PyTorch's update rules, so a run can be checked against torch.optim.
//
// Note [Optimizer state in checkpoints]
// An optimizer lists its state as named tensors: the kind of state, then the
// parameter it belongs to. AdamW's kinds are PyTorch's state_dict names:
// "exp_avg.layers.0.weight", "exp_avg_sq.layers.0.weight" and one "step".
// SGD's buffer is "momentum.layers.0.weight" (PyTorch says momentum_buffer;
// checkpoints written before AdamW existed use this name). A checkpoint stores them as
// "optimizer.<name>", so the checkpoint code needs no knowledge of any one optimizer. State is
// created by the first step, zeroed (before it, state() lists slots whose tensors are empty, and a
// checkpoint holds none of them). A checkpoint must therefore hold all of an optimizer's state or
// none of it: anything in between, or a name this optimizer does not keep, is a damaged or foreign
// file.
//
// Note [Skipping a step on the device]
// --skip-nonfinite must decide, per step, whether to update at all. On the
// CPU the trainer reads the gradients and simply does not call step(). On a
// GPU reading a flag back would stall the host every step, so the decision
// stays on the device: a kernel raises a flag in device memory when a
// gradient is not finite, and every update kernel of the step reads that
// flag and writes nothing when it is set. The host learns which steps were
// skipped when it next reads the loss (a sync it makes anyway). So the host
// cannot know which step was the first real update, nor how many there have
// been: whatever state depends on that lives on the device too (SGD's
// momentum starts zeroed; AdamW counts its steps in device memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainer/layer.h"

namespace ddp::trainer {

// What one update is told besides the gradients. All optional.
struct StepInputs {
  // CPU parameters: the gradients are multiplied by this as they are read
  // (clipping: Note [Clipping the averaged gradient] in trainer/clip.h).
  float gradScale = 1.0f;
  // CUDA parameters (device memory): the update happens only if *deviceSkip
  // is 0 when the kernels run (Note [Skipping a step on the device]). Pass
  // it on every step of a run or on none.
  const std::int32_t* deviceSkip = nullptr;
  // CUDA parameters (device memory): gradScale, computed on the device.
  const float* deviceGradScale = nullptr;
};

// One tensor of an optimizer's state. `tensor` is owned by the optimizer and
// empty until the first step creates it; a restore fills it with `shape`
// on `device`.
struct OptimizerState {
  std::string name;  // Note [Optimizer state in checkpoints]
  Tensor* tensor;
  Shape shape;
  Device device;
  // The parameter this state belongs to ("exp_avg.<parameter>"); null for
  // state of the optimizer as a whole (AdamW's "step").
  const Parameter* parameter = nullptr;
  // The tensor was made for a checkpoint (a sharded optimizer's gathered
  // state) and nothing writes it afterwards: releaseGatheredState() only lets
  // go of it. So a checkpoint writer may keep it instead of copying it.
  bool snapshot = false;
  // A sharded optimizer's checkpoint form: the state exists, each rank
  // holding its part, whether or not `tensor` holds it gathered (a
  // checkpoint holds every slot whose state exists: checkpointEntries()
  // in trainer/checkpoint.h).
  bool onShards = false;
};

// Where streamState delivers the state: slot `slot` of state() gets the
// elements [begin, begin + values.size()). The values are the optimizer's
// buffer, valid during the call only.
using StatePieceSink =
    std::function<void(std::size_t slot, std::size_t begin, std::span<const float> values)>;

// The weight decay `p` gets: `weightDecay`, except that without
// `decayBiases` the 1-D parameters (the biases) get none. That is
// --no-bias-decay, how GPT-2, llm.c and Megatron-Core train; PyTorch users
// get it from a second parameter group with weight_decay=0.
inline float weightDecayOf(const Parameter& p, float weightDecay, bool decayBiases) {
  const Parameter& whole = p.sliceOf != nullptr ? *p.sliceOf : p;
  return decayBiases || whole.value.shape().size() != 1 ? weightDecay : 0.0f;
}

// Which part of the averaged gradient each rank's optimizer reads: rank q
// reads elements [bounds[q], bounds[q+1]) of the trainable gradients laid
// end to end in reverse registration order, parameter t's first element at
// offsets[t] (t counting trainable parameters only).
struct GradientPartition {
  std::vector<std::size_t> bounds;
  std::vector<std::size_t> offsets;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update from the current gradients (already averaged across ranks).
  virtual void step(const StepInputs& inputs = {}) = 0;
  // The learning rate of the next step; setLearningRate changes it (schedules).
  virtual float learningRate() const = 0;
  virtual void setLearningRate(float lr) = 0;
  // Every state slot this optimizer keeps, created or not, in a fixed order.
  virtual std::vector<OptimizerState> state() = 0;
  // "sgd" or "adamw", for messages.
  virtual const char* name() const = 0;

  // Restoring a checkpoint (Note [Restoring a checkpoint from one rank] in
  // trainer/checkpoint_broadcast.h): slot `slot` of state() gets the
  // checkpoint's elements [begin, begin + values.size()), piece after piece
  // in order, the pieces covering it once. The default keeps all of them: the
  // first piece gives the slot a tensor of its shape on its device, and each
  // piece is copied in. A sharded optimizer keeps only its part.
  virtual void restoreState(const OptimizerState& slot, std::size_t begin,
                            std::span<const float> values);
  // Restoring a checkpoint that holds no state (one written before the first
  // step): every slot empty, so the next step creates it.
  virtual void clearState();

  // A sharded optimizer (trainer/sharded_optimizer.h) keeps only this rank's
  // part of its state. Its state() is then the checkpoint form, whose tensors
  // hold data only between gatherState(root), a collective after which
  // `root` holds all of it, and releaseGatheredState(). For the others these
  // do nothing.
  virtual bool sharded() const { return false; }
  // Set when step() reads only this rank's part of each gradient (a sharded
  // optimizer): the Reducer may then reduce-scatter (Note
  // [Reduce-scatter for a sharded optimizer] in comm/reducer.h). Unset: the
  // whole averaged gradient on every rank.
  virtual std::optional<GradientPartition> gradientPartition() const { return std::nullopt; }
  virtual void gatherState(int /*root*/) {}
  virtual void releaseGatheredState() {}
  // Collective, like gatherState, but nothing is kept: `root`'s `deliver`
  // is handed the state of every slot onShards piece by piece, as the
  // pieces arrive, in no particular order, each element once (the others
  // pass an empty one, which is not called). So a checkpoint's state can go
  // into its file without rank 0 ever holding all of it (Note [Streaming a
  // sharded optimizer's state] in trainer/sharded_optimizer.h). If
  // `deliver` throws, nothing more is delivered, the collective goes on to
  // its end (the other ranks are in it), and the exception is rethrown
  // then. For the others: nothing.
  virtual void streamState(int /*root*/, const StatePieceSink& /*deliver*/) {}
};

}  // namespace ddp::trainer
