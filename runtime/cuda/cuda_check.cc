#include "runtime/cuda/cuda_check.h"

#include "runtime/cuda/cublas_library.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace ddp::detail {

void throwCudaError(cudaError_t code, const char* call, const char* file, int line) {
  throw DeviceError(str(call, " failed on rank ", log::processRank(), " at ", file, ":", line, ": ",
                        cudaGetErrorString(code), " (", cudaGetErrorName(code), ")"));
}

void throwCublasError(cublasStatus_t code, const char* call, const char* file, int line) {
  throw DeviceError(str(call, " failed on rank ", log::processRank(), " at ", file, ":", line, ": ",
                        cuda::cublas().getStatusString(code), " (cuBLAS status ",
                        static_cast<int>(code), ")"));
}

}  // namespace ddp::detail
