#include "runtime/cuda/context.h"

#include "runtime/cuda/cublas_library.h"
#include "runtime/cuda/cuda_check.h"

namespace ddp::cuda {
namespace {

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;

  Context() {
    DDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // The first GPU call of a run opens cuBLAS: Note [cuBLAS opened on first use].
    const CublasLibrary& library = cublas();
    DDP_CUBLAS_CHECK(library.create(&blas));
    DDP_CUBLAS_CHECK(library.setStream(blas, stream));
    // Full fp32 GEMMs: the CPU path is the reference for correctness, and the
    // comparison with PyTorch uses its default (TF32 off for matmul).
    DDP_CUBLAS_CHECK(library.setMathMode(blas, CUBLAS_DEFAULT_MATH));
  }
};

Context& context() {
  static Context* instance = new Context;  // never destroyed: Note [One compute stream]
  return *instance;
}

}  // namespace

cudaStream_t computeStream() {
  return context().stream;
}

cublasHandle_t blasHandle() {
  return context().blas;
}

void synchronizeCompute() {
  DDP_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
}

}  // namespace ddp::cuda
