#include "runtime/cuda/device.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace ddp::cuda {

int visibleDeviceCount() {
  int count = 0;  // cudaGetDeviceCount leaves it untouched when there is no driver
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

int deviceForLocalRank(int localRank, int localSize, int visible) {
  if (visible <= 0) {
    throw UsageError(
        "--device cuda: no CUDA device is visible to this process (check the driver, "
        "CUDA_VISIBLE_DEVICES and the job's GPU allocation), or use --device cpu");
  }
  if (localSize > visible) {
    throw UsageError(str("--device cuda: ", localSize, " ranks run on this node but only ", visible,
                         " GPU", visible == 1 ? " is" : "s are",
                         " visible; start at most one rank per GPU (mpirun -np / srun "
                         "--ntasks-per-node) or make more GPUs visible"));
  }
  return localRank % visible;
}

DeviceInfo deviceInfo(int index) {
  cudaDeviceProp properties{};
  DDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
  char busId[32] = {};
  DDP_CUDA_CHECK(cudaDeviceGetPCIBusId(busId, sizeof busId, index));
  DeviceInfo info;
  info.index = index;
  info.name = properties.name;
  info.busId = busId;
  info.memoryBytes = properties.totalGlobalMem;
  info.computeMajor = properties.major;
  info.computeMinor = properties.minor;
  return info;
}

void setDevice(int index) {
  DDP_CUDA_CHECK(cudaSetDevice(index));
}

int currentDevice() {
  int index = 0;
  DDP_CUDA_CHECK(cudaGetDevice(&index));
  return index;
}

}  // namespace ddp::cuda
