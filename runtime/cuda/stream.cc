#include "runtime/cuda/stream.h"

#include "runtime/cuda/cuda_check.h"

namespace ddp::cuda {

Stream::Stream() {
  DDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void Stream::synchronize() const {
  DDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
  DDP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) {
  DDP_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::makeWait(cudaStream_t stream) const {
  DDP_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: clear it
    return false;
  }
  DDP_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  DDP_CUDA_CHECK(cudaEventSynchronize(event_));
}

}  // namespace ddp::cuda
