// BatchLoader: the samples of one batch, on the model's device, for its
// forward pass. The Trainer loads its training and evaluation batches
// through one, and ddp_train --evaluate through its own (trainer::evaluate).
//
// On the CPU the samples are gathered on the calling thread into host memory
// the loader keeps; on the GPU they go through cuda::DeviceBatches (gathered
// into page-locked memory and copied while the previous batch computes).
// Training thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trainer/cross_entropy.h"
#include "trainer/dataset.h"
#include "trainer/sequential.h"
#include "trainer/tensor.h"

namespace ddp::trainer {

class BatchLoader {
 public:
  // `gatherThreads`: on the GPU, the host threads (the caller's included)
  // that gather a large batch (Note [Threads kept for the batch gather] in
  // runtime/parallel_for.h), started here and kept until the destructor.
  // The CPU gathers on the calling thread alone.
  BatchLoader(Device device, unsigned gatherThreads);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  struct Batch {
    const Tensor& features;  // [rows, featureDim] on the device
    // rows labels, on the device: host memory on the CPU, device memory on
    // the GPU.
    const std::int32_t* labels;
  };
  // The batch stays valid until the next load on the CPU, the load after
  // next on the GPU (whose copy of batch k+1 overlaps batch k's compute):
  // either way through a forward and its backward.
  Batch load(const Dataset& dataset, std::span<const std::size_t> indices);

  Device device() const { return device_; }

 private:
  struct OnGpu;  // the GPU's loader; an empty shell without CUDA
  Device device_;
  std::unique_ptr<OnGpu> gpu_;  // null on the CPU
  Tensor features_;             // the CPU's batch
  std::vector<std::int32_t> labels_;
};

// The forward pass of `batch` through `model` and its loss: adds weight x
// the batch's mean loss and its correct rows to `totals`, which are where
// the model is (on the GPU, without waiting for the device). Returns the
// logits; `loss` keeps what its backward needs.
const Tensor& forwardWithLoss(Sequential& model, SoftmaxCrossEntropy& loss,
                              const BatchLoader::Batch& batch, double weight, LossTotals& totals);

}  // namespace ddp::trainer
