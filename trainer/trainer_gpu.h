// Trainer::Gpu: what the GPU path keeps across a step (the phase timer, the per-step flags and
// norms the host reads back with the loss). trainer.cc's only; without CUDA an empty shell whose
// mark() does nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "ddp_config.h"
#include "runtime/error.h"
#include "trainer/trainer.h"
#if DDP_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/memory.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/step_timer.h"
#endif

namespace ddp::trainer {

// The phases of PhaseTimes, in order, for the GPU's step timer.
enum Phase : std::size_t { kDataPhase, kForwardPhase, kBackwardPhase, kCommPhase, kOptimizerPhase };

#if DDP_WITH_CUDA
// One device value per step whose loss the host has not read yet: written by
// a kernel, read back in a group with the loss.
template <class T>
class StepSlots {
 public:
  explicit StepSlots(std::size_t capacity) : capacity_(capacity) {
    if (capacity > 0) memory_ = ddp::cuda::allocateDevice(capacity * sizeof(T));  // zeroed
  }
  // The next step's slot, zero until a kernel writes it.
  T* next() {
    DDP_CHECK(used_ < capacity_, "more unread steps than step slots");
    return static_cast<T*>(memory_.get()) + used_++;
  }
  // The values of the steps since the last call, in order (waits for the
  // device); the slots are zeroed again.
  std::vector<T> take() {
    std::vector<T> values(used_);
    if (used_ > 0) {
      const std::size_t bytes = used_ * sizeof(T);
      ddp::cuda::copyToHost(values.data(), memory_.get(), bytes);
      DDP_CUDA_CHECK(cudaMemsetAsync(memory_.get(), 0, bytes, ddp::cuda::computeStream()));
    }
    used_ = 0;
    return values;
  }

 private:
  std::shared_ptr<void> memory_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

struct Trainer::Gpu {
  // slots: steps whose loss may be unread at once; the skip flags
  // (--skip-nonfinite) and norms (--clip-grad-norm) need one each per step.
  // world: the ranks whose sums of squares a reduce-scattering step gathers.
  Gpu(std::size_t skipSlots, std::size_t normSlots, std::size_t world)
      : skipFlags(skipSlots), gradNorms(normSlots), world(world) {
    if (normSlots > 0) {
      clipScratch =
          ddp::cuda::allocateDevice((cuda::kNormPartials + world) * sizeof(double) + sizeof(float));
    }
  }
  cuda::StepTimer timer;
  void mark(Phase phase) { timer.mark(phase); }

  // --skip-nonfinite (Note [Skipping a step on the device] in trainer/optimizer.h):
  // one flag per step whose loss is unread, raised by a kernel when a reduced
  // gradient is not finite; the step's update kernels read it.
  StepSlots<std::int32_t> skipFlags;
  // --clip-grad-norm (Note [Clipping the averaged gradient] in
  // trainer/clip.h): each step's norm, and scratch for the partial sums and
  // the scale, which the step's update kernels read.
  StepSlots<float> gradNorms;
  std::size_t world;
  std::shared_ptr<void> clipScratch;  // kNormPartials partials, world sums, the scale

  // Queues the check of every reduced gradient; returns the step's flag
  // (zero until the check raises it: flags start zeroed and are cleared
  // when they are taken, so a step launches one kernel and nothing else).
  // Reduce-scattering, each rank checks the part it received and the ranks
  // take the largest flag, on the device: every rank skips alike.
  const std::int32_t* flagNonFinite(const comm::Reducer& reducer, comm::Communicator& comm) {
    std::int32_t* flag = skipFlags.next();
    const auto [begin, end] = reducedPart(reducer, comm);
    cuda::flagNonFinite(static_cast<const float*>(reducer.storage().get()) + begin, end - begin,
                        flag);
    if (reducer.scatters()) {
      comm.allreduce(std::span<std::int32_t>(flag, 1), comm::ReduceOp::kMax)
          ->synchronize(comm.options().timeout);  // the compute stream waits, not the host
    }
    return flag;
  }
  // Queues the norm of the reduced gradients and the clipping factor;
  // returns the factor (device memory, valid until the next step's).
  // Reduce-scattering, each rank sums the squares of its part, the ranks
  // all-gather the sums and each adds them in rank order: the same norm,
  // to the bit, on every rank.
  const float* clipGradients(const comm::Reducer& reducer, comm::Communicator& comm,
                             float maxNorm) {
    auto* partials = static_cast<double*>(clipScratch.get());
    double* squares = partials + cuda::kNormPartials;
    auto* scale = reinterpret_cast<float*>(squares + world);
    const auto* storage = static_cast<const float*>(reducer.storage().get());
    if (!reducer.scatters()) {
      cuda::clipByNorm(storage, reducer.storageElements(), maxNorm, partials, gradNorms.next(),
                       scale);
      return scale;
    }
    DDP_CHECK(static_cast<std::size_t>(comm.size()) == world, "a world of another size");
    const auto [begin, end] = reducedPart(reducer, comm);
    double* mine = squares + comm.rank();
    cuda::sumOfSquares(storage + begin, end - begin, partials, mine);
    comm.allgather(mine, squares, 1, comm::DataType::kFloat64)->synchronize(comm.options().timeout);
    cuda::clipByNormOfParts(squares, world, maxNorm, gradNorms.next(), scale);
    return scale;
  }

 private:
  // The elements of the Reducer's storage that hold the mean after
  // finalize(): this rank's part when reduce-scattering, else all of them.
  static std::pair<std::size_t, std::size_t> reducedPart(const comm::Reducer& reducer,
                                                         const comm::Communicator& comm) {
    if (!reducer.scatters()) return {0, reducer.storageElements()};
    const std::vector<std::size_t>& bounds = reducer.options().scatterBounds;
    const auto r = static_cast<std::size_t>(comm.rank());
    return {bounds[r], bounds[r + 1]};
  }
};
static_assert(cuda::StepTimer::kPhases == kOptimizerPhase + 1);
#else
struct Trainer::Gpu {
  Gpu(std::size_t, std::size_t, std::size_t) {}
  void mark(Phase) {}
};
#endif

}  // namespace ddp::trainer
