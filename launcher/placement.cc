#include "launcher/placement.h"

#include <mpi.h>

#include <climits>
#include <cstring>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "ddp_config.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mpi_check.h"
#if DDP_WITH_CUDA
#include "comm/nccl/nccl_communicator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublas_library.h"
#include "runtime/cuda/device.h"
#endif

namespace ddp::launcher {
namespace {

// Throws UsageError (or DeviceError) when --device cannot be honoured here.
Placement resolve(const Options& o, const World& world) {
  Placement placement;
  placement.summary = "cpu";
  placement.rankLine = str("host ", world.hostname(), ", rank ", world.rank(), ", local rank ",
                           world.localRank(), ", CPU");
  if (o.device == "cpu") return placement;
#if DDP_WITH_CUDA
  const int visible = cuda::visibleDeviceCount();
  if (o.device == "auto" && visible == 0) return placement;
  if (!o.trace.empty()) {
    throw UsageError(
        "--trace records CPU steps only; GPU steps report device-timed phases in the progress "
        "lines and --metrics instead");
  }
  placement.gpu = cuda::deviceForLocalRank(world.localRank(), world.localSize(), visible);
  cuda::setDevice(placement.gpu);
  const cuda::DeviceInfo info = cuda::deviceInfo(placement.gpu);
  // Opened here rather than by the first GEMM, so that a cuBLAS that cannot
  // be opened is agreed on below and reported once (Note [cuBLAS opened on
  // first use]).
  cuda::cublas();
  placement.device = trainer::Device::kCuda;
  placement.summary =
      str("cuda (", info.name, ", one GPU per rank, ", visible, " visible per node)");
  placement.rankLine =
      str("host ", world.hostname(), ", rank ", world.rank(), ", local rank ", world.localRank(),
          ", GPU ", placement.gpu, " ", info.name, " (sm_", info.computeMajor, info.computeMinor,
          ", ", info.memoryBytes >> 30, " GiB), bus ", info.busId);
  return placement;
#else
  return placement;  // options.cc already refused --device cuda in this build
#endif
}

}  // namespace

Placement choosePlacement(const Options& options, const World& world) {
  Placement placement;
  try {
    placement = resolve(options, world);
  } catch (const Error& e) {
    placement = Placement{};
    placement.error = e.what();
  }
  // One agreement: the lowest rank with an error reports it; otherwise every
  // rank must have the same kind of device.
  int firstError = placement.error.empty() ? INT_MAX : world.rank();
  int cuda[2] = {placement.device == trainer::Device::kCuda ? 1 : 0, 0};
  cuda[1] = -cuda[0];
  DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &firstError, 1, MPI_INT, MPI_MIN, world.comm()));
  DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, cuda, 2, MPI_INT, MPI_MAX, world.comm()));
  if (firstError != INT_MAX) {
    placement.printsError = world.rank() == firstError;
    if (placement.error.empty())
      placement.error = str("rank ", firstError, " could not use --device (its line says why)");
    return placement;
  }
  const bool someCuda = cuda[0] == 1, someCpu = cuda[1] == 0;
  if (someCuda && someCpu) {
    placement.error =
        "--device auto found GPUs on some nodes and none on others; every rank must train on the "
        "same kind of device (use --device cpu, or run on GPU nodes only)";
    placement.printsError = world.rank() == 0;
  }
  return placement;
}

void printPlacements(const Placement& placement, const World& world) {
  constexpr int kLine = 256;
  char mine[kLine] = {};
  std::strncpy(mine, placement.rankLine.c_str(), kLine - 1);
  std::vector<char> all(world.rank() == 0 ? static_cast<std::size_t>(kLine) * world.size() : 1);
  DDP_MPI_CHECK(MPI_Gather(mine, kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, world.comm()));
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r)
    log::info(std::string(all.data() + static_cast<std::size_t>(r) * kLine));
}

std::unique_ptr<comm::Communicator> makeCommunicator(
    const Placement& placement, const World& world, comm::CommOptions options,
    std::function<void(const CommError&)> onFatal) {
#if DDP_WITH_CUDA
  if (placement.device == trainer::Device::kCuda) {
    auto nccl = std::make_unique<comm::NcclCommunicator>(world.comm(), placement.gpu,
                                                         cuda::computeStream(), options);
    nccl->setFatalHandler(std::move(onFatal));
    return nccl;
  }
#else
  (void)placement;
  (void)onFatal;
#endif
  return std::make_unique<comm::MpiCommunicator>(world.comm(), options);
}

}  // namespace ddp::launcher
