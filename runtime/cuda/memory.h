// Device and pinned host memory, owned through shared_ptr<void> (the same
// owner type host tensors and communicator allocations use), so a tensor view
// keeps its storage alive whatever kind it is.
#pragma once

#include <cstddef>
#include <memory>

namespace ddp::cuda {

// `bytes` of zeroed device memory on the current device; cudaFree on release.
// Throws DeviceError (e.g. out of memory, with the size asked for).
std::shared_ptr<void> allocateDevice(std::size_t bytes);

// `bytes` of page-locked host memory (cudaMallocHost), for copies that
// overlap compute. Not zeroed.
std::shared_ptr<void> allocatePinned(std::size_t bytes);

// Copies on the compute stream and waits for it (Note [One compute stream]):
// for set-up, checkpoints and tests, never inside a training step.
void copyToDevice(void* device, const void* host, std::size_t bytes);
void copyToHost(void* host, const void* device, std::size_t bytes);
// Device to device, on the compute stream, without waiting.
void copyOnDevice(void* to, const void* from, std::size_t bytes);

// Whether `pointer` is device memory (cudaPointerGetAttributes). False for
// host memory, pinned or not, and on machines without a device.
bool isDevicePointer(const void* pointer);

}  // namespace ddp::cuda
