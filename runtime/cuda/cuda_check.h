// The checked-call macros for the CUDA runtime and cuBLAS.
//
// Every CUDA or cuBLAS call in ddp goes through one of these. A failure
// throws DeviceError naming the call, file:line, the rank and the library's
// own message, e.g.
//   cudaMalloc(&p, bytes) failed on rank 3 at runtime/cuda/memory.cc:21:
//   out of memory (cudaErrorMemoryAllocation)
// Only files compiled when the `cuda` feature is on include this.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ddp::detail {

[[noreturn]] void throwCudaError(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throwCublasError(cublasStatus_t code, const char* call, const char* file,
                                   int line);

}  // namespace ddp::detail

#define DDP_CUDA_CHECK(call)                                                 \
  do {                                                                       \
    const cudaError_t ddpCudaCode = (call);                                  \
    if (ddpCudaCode != cudaSuccess)                                          \
      ::ddp::detail::throwCudaError(ddpCudaCode, #call, __FILE__, __LINE__); \
  } while (0)

#define DDP_CUBLAS_CHECK(call)                                                   \
  do {                                                                           \
    const cublasStatus_t ddpCublasCode = (call);                                 \
    if (ddpCublasCode != CUBLAS_STATUS_SUCCESS)                                  \
      ::ddp::detail::throwCublasError(ddpCublasCode, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration at the launch
// site (errors while the kernel runs surface at the next synchronising call).
#define DDP_CUDA_CHECK_LAUNCH() DDP_CUDA_CHECK(cudaGetLastError())
