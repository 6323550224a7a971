#include "runtime/cuda/memory.h"

#include <algorithm>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/error.h"

namespace ddp::cuda {

std::shared_ptr<void> allocateDevice(std::size_t bytes) {
  void* memory = nullptr;
  const cudaError_t status = cudaMalloc(&memory, std::max<std::size_t>(bytes, 1));
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    std::size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    const std::string report = str("cannot allocate ", bytesString(static_cast<double>(bytes)),
                                   " on GPU ", currentDevice(), ": ", cudaGetErrorString(status),
                                   " (", bytesString(static_cast<double>(free)), " free of ",
                                   bytesString(static_cast<double>(total)), ")");
    if (status == cudaErrorMemoryAllocation) throw OutOfMemoryError(report);
    throw DeviceError(report);
  }
  DDP_CUDA_CHECK(cudaMemsetAsync(memory, 0, bytes, computeStream()));
  return std::shared_ptr<void>(memory, [](void* p) { (void)cudaFree(p); });
}

std::shared_ptr<void> allocatePinned(std::size_t bytes) {
  void* memory = nullptr;
  DDP_CUDA_CHECK(cudaMallocHost(&memory, std::max<std::size_t>(bytes, 1)));
  return std::shared_ptr<void>(memory, [](void* p) { (void)cudaFreeHost(p); });
}

void copyToDevice(void* device, const void* host, std::size_t bytes) {
  DDP_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, computeStream()));
  synchronizeCompute();
}

void copyToHost(void* host, const void* device, std::size_t bytes) {
  DDP_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, computeStream()));
  synchronizeCompute();
}

void copyOnDevice(void* to, const void* from, std::size_t bytes) {
  DDP_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, computeStream()));
}

bool isDevicePointer(const void* pointer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace ddp::cuda
