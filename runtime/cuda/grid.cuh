// Launch shapes for elementwise kernels, shared by every .cu file (trainer
// and comm kernels alike). Device code: include from .cu files only.
//
// Elementwise kernels use grid-stride loops, so any count works with a
// bounded grid:
//   for (std::size_t i = gridIndex(); i < count; i += gridStride()) ...
// launched as kernel<<<blocksFor(count), kThreadsPerBlock, 0, stream>>>.
#pragma once

#include <cstddef>

namespace ddp::cuda {

inline constexpr unsigned kThreadsPerBlock = 256;
// Beyond this many blocks a grid-stride loop gains nothing; it also keeps
// the grid inside every architecture's x-dimension limit.
inline constexpr std::size_t kMaxBlocks = 65535u * 32u;

// Blocks of kThreadsPerBlock for `count` elements: at least one (a launch
// needs a non-empty grid), at most kMaxBlocks.
inline unsigned blocksFor(std::size_t count) {
  const std::size_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// This thread's first element and the loop's stride, in 64 bits (a count
// may exceed 2^32).
__device__ inline std::size_t gridIndex() {
  return blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
}
__device__ inline std::size_t gridStride() {
  return std::size_t{gridDim.x} * blockDim.x;
}

}  // namespace ddp::cuda
