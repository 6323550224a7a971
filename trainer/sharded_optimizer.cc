#include "trainer/sharded_optimizer.h"

#include <algorithm>
#include <exception>

#include "runtime/error.h"

namespace ddp::trainer {

ShardLayout computeShardLayout(std::span<const std::size_t> numels, int world, int rank) {
  DDP_CHECK(world > 0 && rank >= 0 && rank < world, "a rank outside its world");
  ShardLayout layout;
  layout.offsets.resize(numels.size());
  for (std::size_t p = numels.size(); p-- > 0;) {  // the last parameter first, as backward
    layout.offsets[p] = layout.elements;
    layout.elements += numels[p];
  }
  const auto ranks = static_cast<std::size_t>(world);
  layout.shardElements = (layout.elements + ranks - 1) / ranks;
  // The last rank owns E - (world-1) S elements; it must own one at least.
  if (layout.elements == 0 || (ranks - 1) * layout.shardElements >= layout.elements) {
    throw UsageError(str("cannot shard the optimizer state of ", layout.elements,
                         " trainable elements over ", world,
                         " ranks: some rank would own none of it"));
  }
  for (std::size_t q = 0; q <= ranks; ++q)
    layout.bounds.push_back(std::min(layout.elements, q * layout.shardElements));
  const std::size_t first = layout.bounds[static_cast<std::size_t>(rank)];
  const std::size_t last = layout.bounds[static_cast<std::size_t>(rank) + 1];
  for (std::size_t p = numels.size(); p-- > 0;) {
    const std::size_t begin = std::max(first, layout.offsets[p]);
    const std::size_t end = std::min(last, layout.offsets[p] + numels[p]);
    if (begin >= end) continue;
    layout.slices.push_back({p, begin - layout.offsets[p], end - begin, begin - first});
  }
  return layout;
}

ShardedOptimizer::ShardedOptimizer(comm::Communicator& comm, std::vector<Parameter*> parameters,
                                   const Factory& makeOptimizer)
    : comm_(comm) {
  std::vector<std::size_t> numels;
  for (Parameter* p : parameters) {
    if (!p->trainable) continue;
    trainable_.push_back(p);
    numels.push_back(p->value.numel());
  }
  layout_ = computeShardLayout(numels, comm.size(), comm.rank());
  device_ = trainable_.front()->value.device();
  const std::size_t world = static_cast<std::size_t>(comm.size());
  // Note [Node shared-memory all-gather]: on one node, memory the ranks share.
  DDP_CHECK(
      (comm.allocatedMemory() == comm::Communicator::Memory::kDevice) == (device_ == Device::kCuda),
      "a sharded optimizer whose communicator does not use its parameters' memory");
  flat_ = comm.allocate(world * layout_.shardElements * sizeof(float));
  float* flat = static_cast<float*>(flat_.get());
  for (std::size_t t = 0; t < trainable_.size(); ++t) {
    Parameter& p = *trainable_[t];
    DDP_CHECK(p.value.device() == device_, "a model on more than one device");
    Tensor moved = Tensor::view(flat + layout_.offsets[t], p.value.shape(), flat_, device_);
    moved.copyFrom(p.value);
    p.value = std::move(moved);
  }
  slices_.reserve(layout_.slices.size());  // the wrapped optimizer keeps pointers
  std::vector<Parameter*> slices;
  for (const ShardSlice& s : layout_.slices) {
    const Parameter& whole = *trainable_[s.parameter];
    Parameter slice;
    slice.name = whole.name;
    slice.value =
        Tensor::view(trainable_[s.parameter]->value.data() + s.begin, {s.count}, flat_, device_);
    slice.sliceOf = &whole;
    slices_.push_back(std::move(slice));
    slices.push_back(&slices_.back());
  }
  inner_ = makeOptimizer(std::move(slices));
  for (const OptimizerState& slot : inner_->state()) {
    if (slot.parameter == nullptr) continue;
    const std::string kind =
        slot.name.substr(0, slot.name.size() - slot.parameter->name.size() - 1);
    if (std::find(kinds_.begin(), kinds_.end(), kind) == kinds_.end()) kinds_.push_back(kind);
  }
  full_.resize(kinds_.size() * trainable_.size());
}

std::optional<GradientPartition> ShardedOptimizer::gradientPartition() const {
  return GradientPartition{layout_.bounds, layout_.offsets};
}

std::vector<Tensor*> ShardedOptimizer::sliceState(std::size_t kind) {
  std::vector<Tensor*> tensors(slices_.size(), nullptr);
  for (const OptimizerState& slot : inner_->state()) {
    if (slot.parameter == nullptr || !slot.name.starts_with(kinds_[kind] + ".")) continue;
    const auto s = static_cast<std::size_t>(slot.parameter - slices_.data());
    DDP_CHECK(
        s < slices_.size() && slot.name.size() == kinds_[kind].size() + 1 + slices_[s].name.size(),
        "optimizer state of a parameter the sharded optimizer does not know");
    tensors[s] = slot.tensor;
  }
  for (Tensor* t : tensors)
    DDP_CHECK(t != nullptr, "a slice without state of one of its optimizer's kinds");
  return tensors;
}

void ShardedOptimizer::step(const StepInputs& inputs) {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const ShardSlice& s = layout_.slices[i];
    Tensor& grad = trainable_[s.parameter]->grad;
    DDP_CHECK(grad.numel() == trainable_[s.parameter]->value.numel(),
              "a sharded optimizer step before the gradients exist");
    slices_[i].grad = Tensor::view(grad.data() + s.begin, {s.count}, nullptr, device_);
  }
  inner_->step(inputs);
  // Note [Sharded optimizer state]: this rank's shard is already in place.
  float* all = static_cast<float*>(flat_.get());
  const std::size_t count = layout_.shardElements;
  const comm::WorkPtr work = comm_.allgather(all + static_cast<std::size_t>(comm_.rank()) * count,
                                             all, count, comm::DataType::kFloat32);
  if (device_ == Device::kCuda) {
    work->synchronize(comm_.options().timeout);  // the compute stream waits, not the host
  } else {
    work->wait(comm_.options().timeout);
  }
}

std::vector<OptimizerState> ShardedOptimizer::state() {
  std::vector<OptimizerState> slots;
  for (std::size_t k = 0; k < kinds_.size(); ++k) {
    // State is created by the first step, for every slice at once, and every
    // rank has taken the same steps: a kind exists on all ranks or on none.
    const bool exists = !sliceState(k).front()->empty();
    for (std::size_t t = 0; t < trainable_.size(); ++t) {
      slots.push_back({kinds_[k] + "." + trainable_[t]->name, &full(k, t),
                       trainable_[t]->value.shape(), Device::kCpu, trainable_[t], true, exists});
    }
  }
  for (const OptimizerState& slot : inner_->state()) {
    if (slot.parameter == nullptr) slots.push_back(slot);
  }
  return slots;
}

void ShardedOptimizer::gatherState(int root) {
  releaseGatheredState();
  if (comm_.rank() == root) {
    gathered_.resize(kinds_.size());
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      if (sliceState(k).front()->empty()) continue;
      // The shards laid end to end are the parameters laid end to end: each
      // parameter's state is a range of `all`, viewed, not copied. A
      // checkpoint writer keeps the views (OptimizerState::snapshot), and
      // with them `all`, until the file is written; the gather overwrites
      // every element, so the last checkpoint's buffer serves again once
      // nothing else holds it (the root waits for that write first).
      std::shared_ptr<Tensor>& all = gathered_[k];
      if (!all || all.use_count() > 1) all = std::make_shared<Tensor>(Shape{layout_.elements});
      for (std::size_t t = 0; t < trainable_.size(); ++t) {
        full(k, t) =
            Tensor::view(all->data() + layout_.offsets[t], trainable_[t]->value.shape(), all);
      }
    }
  }
  streamState(root, [this](std::size_t slot, std::size_t begin, std::span<const float> values) {
    std::copy(values.begin(), values.end(), full_[slot].data() + begin);
  });
}

void ShardedOptimizer::streamState(int root, const StatePieceSink& deliver) {
  const bool atRoot = comm_.rank() == root;
  const std::size_t count = layout_.shardElements;
  const auto world = static_cast<std::size_t>(comm_.size());
  // Note [Streaming a sharded optimizer's state]: each rank sends its shard
  // in pieces; the root's pieces from all ranks together are
  // kGatherPieceBytes, and they are all it holds.
  const std::size_t piece =
      std::clamp<std::size_t>(kGatherPieceBytes / sizeof(float) / world, 1, count);
  std::vector<float> mine(piece), received(atRoot ? piece * world : 0);
  std::exception_ptr failed;
  for (std::size_t k = 0; k < kinds_.size(); ++k) {
    const std::vector<Tensor*> tensors = sliceState(k);
    if (tensors.front()->empty()) continue;  // on no rank (state())
    for (std::size_t start = 0; start < count; start += piece) {
      const std::size_t n = std::min(piece, count - start);
      std::fill(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);  // padding
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const ShardSlice& s = layout_.slices[i];
        const std::size_t from = std::max(start, s.shardOffset);
        const std::size_t to = std::min(start + n, s.shardOffset + s.count);
        if (from >= to) continue;
        Tensor::view(mine.data() + (from - start), {to - from}, nullptr)
            .copyFrom(Tensor::view(tensors[i]->data() + (from - s.shardOffset), {to - from},
                                   nullptr, device_));
      }
      comm_
          .gather(mine.data(), atRoot ? received.data() : nullptr, n, comm::DataType::kFloat32,
                  root)
          ->wait(comm_.options().timeout);
      if (!atRoot || failed) continue;
      try {
        // Rank r's piece is elements [r S + start, r S + start + n) of the
        // parameters laid end to end (the last rank's end is padding).
        for (std::size_t r = 0; r < world; ++r) {
          const std::size_t first = r * count + start;
          const std::size_t last = std::min(first + n, layout_.elements);
          for (std::size_t t = 0; t < trainable_.size(); ++t) {
            const std::size_t begin = layout_.offsets[t];
            const std::size_t from = std::max(first, begin);
            const std::size_t to = std::min(last, begin + trainable_[t]->value.numel());
            if (from >= to) continue;
            deliver(k * trainable_.size() + t, from - begin,
                    std::span<const float>(received.data() + r * n + (from - first), to - from));
          }
        }
      } catch (...) {
        failed = std::current_exception();  // the others are still gathering
      }
    }
  }
  if (failed) std::rethrow_exception(failed);
}

void ShardedOptimizer::releaseGatheredState() {
  for (Tensor& t : full_)
    t = Tensor();
}

void ShardedOptimizer::restoreState(const OptimizerState& slot, std::size_t begin,
                                    std::span<const float> values) {
  if (slot.parameter == nullptr) {  // replicated (AdamW's step): all of it
    inner_->restoreState(slot, begin, values);
    return;
  }
  const auto index = static_cast<std::size_t>(slot.tensor - full_.data());
  DDP_CHECK(index < full_.size(),
            str("restoring optimizer state ", slot.name, " that is not the sharded optimizer's"));
  const std::size_t kind = index / trainable_.size(), parameter = index % trainable_.size();
  const std::vector<Tensor*> tensors = sliceState(kind);
  const std::size_t end = begin + values.size();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ShardSlice& s = layout_.slices[i];
    const std::size_t from = std::max(begin, s.begin), to = std::min(end, s.begin + s.count);
    if (s.parameter != parameter || from >= to) continue;
    // Pieces come in order: the one holding the slice's first element is its first.
    if (from == s.begin) *tensors[i] = Tensor({s.count}, device_);
    tensors[i]->copyFromHost(from - s.begin, values.subspan(from - begin, to - from));
  }
}

void ShardedOptimizer::clearState() {
  inner_->clearState();
  releaseGatheredState();
}

}  // namespace ddp::trainer
