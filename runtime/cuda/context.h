// The compute stream of this process and the cuBLAS handle bound to it.
//
// Note [One compute stream]
// Everything a training step computes on the GPU (data copies into the
// model, forward, backward, loss, optimizer) is issued, in program order, on
// one non-blocking stream: computeStream(). Program order on that stream is
// then the only ordering those kernels need, and the host never waits inside
// a step. Other streams exist only where work must overlap with it: NCCL's
// communication stream (comm/nccl) and the host-to-device copy stream
// (trainer/cuda/device_batches.h); each meets the compute stream through
// events, never through host synchronisation.
//
// Created on first use, on the calling thread's current device (set it first:
// cuda::setDevice). Lives until the process exits: it is deliberately never
// destroyed, because static destructors run after the CUDA runtime may have
// torn itself down.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ddp::cuda {

cudaStream_t computeStream();
// Bound to computeStream(). ddp does not link cuBLAS (Note [cuBLAS opened on
// first use], runtime/cuda/cublas_library.h): call it through cublas(), or
// link cuBLAS yourself, which loads the same library.
cublasHandle_t blasHandle();

// Blocks the host until the compute stream has run everything issued so far.
void synchronizeCompute();

}  // namespace ddp::cuda
