// Batches for a model on the GPU, copied while the previous batch computes.
//
// Each batch is gathered on the host (Dataset::gather) into page-locked
// memory and copied to the device on a copy stream of its own; the compute
// stream waits for that copy through an event (Note [One compute stream] in
// runtime/cuda/context.h). Two slots alternate, so the host gathers and the
// copy engine copies batch k+1 while the GPU still computes batch k:
//   load(k):  host waits until slot k%2's previous copy (batch k-2) is done,
//             gathers into it, copy stream waits until the compute stream is
//             done with batch k-2 (event `consumed`), copies, records
//             `copied`; the compute stream waits on `copied`.
// The host blocks only if it runs two batches ahead of the GPU.
//
// Training thread only. The returned batch stays valid until the load after
// next (two calls later), which covers a forward and its backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/cuda/stream.h"
#include "runtime/parallel_for.h"
#include "trainer/dataset.h"
#include "trainer/tensor.h"

namespace ddp::trainer::cuda {

class DeviceBatches {
 public:
  // `gatherThreads`: host threads, the caller's included, that gather a
  // large batch (trainer::gatherInParallel; started here, kept until the
  // destructor: Note [Threads kept for the batch gather]).
  explicit DeviceBatches(unsigned gatherThreads = 1);

  struct Batch {
    const Tensor& features;      // [rows, featureDim] on the device
    const std::int32_t* labels;  // rows labels on the device
  };
  Batch load(const Dataset& dataset, std::span<const std::size_t> indices);

 private:
  struct Slot {
    std::size_t capacity = 0;  // rows
    std::shared_ptr<void> hostFeatures;
    std::shared_ptr<void> hostLabels;
    std::shared_ptr<void> deviceFeatures;
    std::shared_ptr<void> deviceLabels;
    Tensor features;  // view of deviceFeatures for this batch
    ddp::cuda::Event copied;
    ddp::cuda::Event consumed;
    bool everLoaded = false;
  };
  ddp::cuda::Stream copyStream_;
  Slot slots_[2];
  std::size_t loads_ = 0;
  ParallelFor gatherThreads_;
};

}  // namespace ddp::trainer::cuda
