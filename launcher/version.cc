#include "launcher/version.h"

#include <mpi.h>

#include "ddp_config.h"
#include "launcher/ddp_revision.h"
#include "runtime/str.h"
#include "trainer/blas_kernels.h"
#if DDP_WITH_CUDA
#include <cuda_runtime.h>

#include "comm/nccl/nccl_communicator.h"
#include "runtime/cuda/cublas_library.h"
#endif

namespace ddp::launcher {
#if DDP_WITH_CUDA
namespace {

// CUDA's version code as "major.minor": 13000 -> "13.0".
std::string cudaVersionString(int code) {
  return str(code / 1000, ".", code % 1000 / 10);
}

}  // namespace
#endif

std::string ddpVersion() {
  const std::string revision = DDP_REVISION;
  return revision == DDP_VERSION ? revision : str(DDP_VERSION, " (git ", revision, ")");
}

std::string versionText() {
  // MPI_Get_library_version may be called before MPI_Init (MPI 3.0, 8.1.1).
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(library, &length);
  std::string mpi(library, static_cast<std::size_t>(length));
  mpi = mpi.substr(0, mpi.find_first_of(",\n"));
  std::string text = str("ddp_train ", ddpVersion(), "\n", "MPI: ", mpi, "\n",
                         "BLAS: ", trainer::describe(trainer::blasKernels()), "\n");
#if DDP_WITH_CUDA
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);  // 0 without a driver
  text += str("CUDA: runtime ", cudaVersionString(runtime), ", driver ",
              driver > 0 ? cudaVersionString(driver) : "none", "\n",
              "cuBLAS: ", cuda::cublasDescription(), "\n",
              "NCCL: ", comm::NcclCommunicator::version(), "\n");
#else
  text += "CUDA: not in this build (CPU only)\n";
#endif
  return text;
}

}  // namespace ddp::launcher
