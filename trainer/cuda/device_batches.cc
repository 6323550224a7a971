#include "trainer/cuda/device_batches.h"

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/memory.h"

namespace ddp::trainer::cuda {

DeviceBatches::DeviceBatches(unsigned gatherThreads) : gatherThreads_(gatherThreads) {}

DeviceBatches::Batch DeviceBatches::load(const Dataset& dataset,
                                         std::span<const std::size_t> indices) {
  const cudaStream_t compute = ddp::cuda::computeStream();
  // Everything issued on the compute stream so far used the previous batch:
  // once it has run, that slot may be overwritten.
  if (loads_ > 0) slots_[(loads_ - 1) % 2].consumed.record(compute);
  Slot& slot = slots_[loads_ % 2];
  ++loads_;
  const std::size_t rows = indices.size(), dim = dataset.featureDim();
  if (slot.everLoaded) slot.copied.synchronize();  // the host buffers are free again
  if (rows > slot.capacity) {
    // New buffers: nothing may still read the old ones.
    if (slot.everLoaded) slot.consumed.synchronize();
    slot.capacity = rows;
    slot.hostFeatures = ddp::cuda::allocatePinned(rows * dim * sizeof(float));
    slot.hostLabels = ddp::cuda::allocatePinned(rows * sizeof(std::int32_t));
    slot.deviceFeatures = ddp::cuda::allocateDevice(rows * dim * sizeof(float));
    slot.deviceLabels = ddp::cuda::allocateDevice(rows * sizeof(std::int32_t));
    ddp::cuda::synchronizeCompute();  // the zero-fill ran before the copy stream writes
  }
  auto* hostFeatures = static_cast<float*>(slot.hostFeatures.get());
  auto* hostLabels = static_cast<std::int32_t*>(slot.hostLabels.get());
  gatherInParallel(dataset, indices, hostFeatures, hostLabels, gatherThreads_);

  const cudaStream_t copy = copyStream_.get();
  if (slot.everLoaded) slot.consumed.makeWait(copy);
  DDP_CUDA_CHECK(cudaMemcpyAsync(slot.deviceFeatures.get(), hostFeatures,
                                 rows * dim * sizeof(float), cudaMemcpyHostToDevice, copy));
  DDP_CUDA_CHECK(cudaMemcpyAsync(slot.deviceLabels.get(), hostLabels, rows * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice, copy));
  slot.copied.record(copy);
  slot.copied.makeWait(compute);
  slot.everLoaded = true;
  slot.features = Tensor::view(static_cast<float*>(slot.deviceFeatures.get()), {rows, dim},
                               slot.deviceFeatures, Device::kCuda);
  return {slot.features, static_cast<const std::int32_t*>(slot.deviceLabels.get())};
}

}  // namespace ddp::trainer::cuda
