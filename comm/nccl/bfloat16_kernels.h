// Device forms of comm/bfloat16.h's conversions, for the bf16 hook on GPUs
// (Communicator::narrowToBFloat16 and widenFromBFloat16 of the NCCL
// backend). The rounding is the host's, bit for bit: to nearest, ties to
// even, a NaN kept a quiet NaN (tests/cuda/nccl_test.cc checks the two
// against each other).
//
// Each queues one kernel on `stream` and returns; the pointers are device
// memory that the caller keeps alive until the stream has run it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ddp::comm {

void bfloat16OnDevice(const float* in, std::uint16_t* out, std::size_t count, cudaStream_t stream);
void float32OnDevice(const std::uint16_t* in, float* out, std::size_t count, cudaStream_t stream);

}  // namespace ddp::comm
