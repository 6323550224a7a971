// ShardedOptimizer: each rank keeps and updates only its own part of the
// optimizer state (--shard-optimizer; ZeRO stage 1, PyTorch's
// ZeroRedundancyOptimizer, Megatron-Core's distributed optimizer).
//
// Note [Sharded optimizer state]
// Plain data parallelism keeps the whole optimizer state on every rank:
// AdamW's two moments are twice the model, on every GPU, the same numbers
// everywhere. Here the trainable parameters are laid end to end in
// registration order (E elements) and cut into world-size shards of
// S = ceil(E / world) elements; rank r owns elements [r S, (r+1) S). Each
// step, rank r runs the wrapped optimizer (Sgd, AdamW) on its slices only,
// then one in-place all-gather hands every rank everyone's updated slices.
// State memory per rank falls from k E to about k E / world floats (k: 1 for
// SGD with momentum, 2 for AdamW).
//
// The order is the one backward produces the gradients in, the last
// parameter first: the Reducer's storage order. So rank r's shard is one
// range of the gradient storage too, and the Reducer
// reduce-scatters the buckets instead of all-reducing them, rank r
// receiving only the averaged gradient of its own range (Note
// [Reduce-scatter for a sharded optimizer] in comm/reducer.h;
// gradientPartition()). A sharded step then moves what an unsharded one
// does: a reduce-scatter and an all-gather, (world-1)/world E floats each
// per rank, against an all-reduce's two. (PyTorch's ZeroRedundancyOptimizer
// keeps the all-reduce and adds broadcasts: 1.5x.) Non-finite checks and
// clipping see the whole gradient, as unsharded: on the host through the
// reduction's checks; on GPUs each rank checks and sums the squares of its
// part on the device and the ranks combine the answers there (Note
// [Reduce-scatter for a sharded optimizer]).
//
// Updates are element-wise, so each weight gets exactly the update the
// unsharded optimizer would give it: a sharded run equals an unsharded one
// bit for bit (tests/e2e/sharded_optimizer.sh). For the all-gather to land in
// place, the parameters' values are moved into one flat buffer of world x S
// floats and become views of it; nothing is copied per step. The buffer comes
// from the communicator's allocate(): on one node, memory the ranks share,
// from which each copies the others' shards directly (Note [Node
// shared-memory all-gather] in comm/mpi/shared_memory.h).
//
// Checkpoints keep their format (one file, whole tensors, the same names), so
// a checkpoint resumes sharded or not, at any world size. Writing one, the
// ranks send each kind of state to rank 0 in pieces, and rank 0 either keeps
// it whole (gatherState) or writes each piece into the file as it arrives
// (streamState; Note [Streaming a sharded optimizer's state]); restoring, the
// file's pieces reach every rank in turn and each keeps its part
// (restoreState; Note [Restoring a checkpoint from one rank] in
// trainer/checkpoint_broadcast.h), so no rank holds all of the state. The
// replica check (Note [Checking that the replicas agree]) covers the weights
// and the replicated state (AdamW's step count): sharded state has one copy,
// so there is nothing to compare it with. And the all-gather re-synchronises
// the weights every step: a weight corrupted on one rank is overwritten by
// its owner's copy, or, corrupted on its owner, handed to every rank. The
// replicas then agree, corrupted or not: in a sharded run the check sees only
// what changed since the last all-gather.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "trainer/optimizer.h"

namespace ddp::trainer {

// One rank's part of one parameter: its elements [begin, begin + count),
// at shardOffset in the rank's shard.
struct ShardSlice {
  std::size_t parameter = 0;  // index among the trainable parameters
  std::size_t begin = 0;
  std::size_t count = 0;
  std::size_t shardOffset = 0;
};

struct ShardLayout {
  std::size_t elements = 0;          // E: every trainable element
  std::size_t shardElements = 0;     // S = ceil(E / world)
  std::vector<std::size_t> offsets;  // per trainable parameter: its first element of E
  std::vector<std::size_t> bounds;   // world + 1: rank q owns [bounds[q], bounds[q+1])
  std::vector<ShardSlice> slices;    // this rank's, in the order of E
};

// The layout for trainable parameters of `numels` elements, in
// registration order, laid end to end last first (a pure function). Throws UsageError when some
// rank would own nothing (fewer elements than that needs).
ShardLayout computeShardLayout(std::span<const std::size_t> numels, int world, int rank);

// Note [Streaming a sharded optimizer's state]
// A checkpoint needs the whole state in rank 0's file, and rank 0 holds a
// world's part of it. Gathering it whole first (gatherState) costs rank 0
// the whole state in memory: twice the model for AdamW, what
// --shard-optimizer saved. --checkpoint-staging copy wants that (the
// gathered tensors are the copy the writer thread writes from, kept and
// not copied again), but where checkpoints are written directly into
// their files (CheckpointWriter's kDirect, chosen where memory is short)
// it was the one copy left: 289 MiB of the large MLP's AdamW state at np=2
// (benchmarks/RESULTS.md, "A sharded optimizer's state streamed into the
// file"). So there streamState hands each gathered piece to the file
// (SafetensorsWriter::writePart) as it arrives, rank 0 holding one piece
// from every rank (kGatherPieceBytes) and nothing else. Each rank sends
// its shard in the same pieces either way, so that none holds a second
// copy of it; gatherState is streamState into the whole tensors.
// A write that fails (a full disk) stops the writing, not the gather: the
// other ranks are sending, and a root that left would leave them waiting
// until --timeout; the error is rethrown once the gather ends, inside
// agree(), which stops every rank.

// What the root receives at a time, from all ranks together.
inline constexpr std::size_t kGatherPieceBytes = std::size_t{4} << 20;

class ShardedOptimizer final : public Optimizer {
 public:
  using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<Parameter*>)>;
  // `makeOptimizer` builds the wrapped optimizer over this rank's slices (1-D
  // parameters whose sliceOf is the whole). Moves the trainable parameters'
  // values into the flat buffer (on their device); frozen ones are left alone.
  // Every rank must build it with the same parameters.
  ShardedOptimizer(comm::Communicator& comm, std::vector<Parameter*> parameters,
                   const Factory& makeOptimizer);

  // Updates this rank's slices, then all-gathers every rank's: afterwards
  // every parameter holds the step's values on every rank. Collective (the
  // training thread, like every step); on a GPU the compute stream waits for
  // the all-gather, the host does not.
  void step(const StepInputs& inputs = {}) override;
  float learningRate() const override { return inner_->learningRate(); }
  void setLearningRate(float lr) override { inner_->setLearningRate(lr); }
  // The checkpoint form: every kind of the wrapped optimizer's per-parameter
  // state for every trainable parameter (host tensors of the parameter's
  // shape, empty except as Optimizer::sharded() describes; onShards once
  // the first step made the state), then its other state (replicated:
  // AdamW's step), as it is.
  std::vector<OptimizerState> state() override;
  const char* name() const override { return inner_->name(); }

  bool sharded() const override { return true; }
  // layout().bounds over the trainable parameters laid end to end last
  // first, which is the Reducer's storage (the trainer checks that), on the
  // host and on GPUs alike.
  std::optional<GradientPartition> gradientPartition() const override;
  // Collective: the kinds of state that exist yet, one after the other,
  // each gathered in pieces of kGatherPieceBytes at the root (Note
  // [Streaming a sharded optimizer's state]).
  void gatherState(int root) override;
  // The same pieces, handed to the root's `deliver` in the order they
  // arrive instead of kept.
  void streamState(int root, const StatePieceSink& deliver) override;
  void releaseGatheredState() override;
  // This rank's part of each piece of per-parameter state; replicated state
  // whole.
  void restoreState(const OptimizerState& slot, std::size_t begin,
                    std::span<const float> values) override;
  void clearState() override;

  const ShardLayout& layout() const { return layout_; }
  Optimizer& inner() { return *inner_; }

 private:
  // The wrapped optimizer's tensors of per-parameter state kind `kind`, one
  // per slice.
  std::vector<Tensor*> sliceState(std::size_t kind);
  Tensor& full(std::size_t kind, std::size_t parameter) {
    return full_[kind * trainable_.size() + parameter];
  }

  comm::Communicator& comm_;
  std::vector<Parameter*> trainable_;
  ShardLayout layout_;
  Device device_ = Device::kCpu;
  // world x S floats from comm_.allocate(): trainable parameter t's values at
  // layout_.offsets[t], rank r's shard at r x S (the all-gather's buffer).
  std::shared_ptr<void> flat_;
  std::vector<Parameter> slices_;  // this rank's parts, as layout_.slices
  std::unique_ptr<Optimizer> inner_;
  std::vector<std::string> kinds_;  // the wrapped optimizer's: "exp_avg", "exp_avg_sq"
  std::vector<Tensor> full_;        // kinds x trainable parameters: the checkpoint form
  // Per kind, the root's buffer that full_ views after gatherState: kept
  // from one checkpoint to the next, as kCopy's own copies are, and gathered
  // into again once the writer has let go of it, so no page of it is
  // faulted in twice (Note [Checkpoints written in the background]).
  std::vector<std::shared_ptr<Tensor>> gathered_;
};

}  // namespace ddp::trainer
