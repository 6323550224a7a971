#include "comm/nccl/bfloat16_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/grid.cuh"

namespace ddp::comm {
namespace {

// The same integer steps as comm/bfloat16.h's toBFloat16, so both sides
// round alike.
__device__ std::uint16_t roundToBFloat16(float value) {
  std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

__global__ void narrowKernel(const float* in, std::uint16_t* out, std::size_t count) {
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    out[i] = roundToBFloat16(in[i]);
}

__global__ void widenKernel(const std::uint16_t* in, float* out, std::size_t count) {
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    out[i] = __uint_as_float(std::uint32_t{in[i]} << 16);
}

}  // namespace

void bfloat16OnDevice(const float* in, std::uint16_t* out, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  narrowKernel<<<ddp::cuda::blocksFor(count), ddp::cuda::kThreadsPerBlock, 0, stream>>>(in, out,
                                                                                        count);
  DDP_CUDA_CHECK_LAUNCH();
}

void float32OnDevice(const std::uint16_t* in, float* out, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  widenKernel<<<ddp::cuda::blocksFor(count), ddp::cuda::kThreadsPerBlock, 0, stream>>>(in, out,
                                                                                       count);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp::comm
