// gtest main for tests that need a GPU: exits 77 (Meson's "skipped") when no
// CUDA device is visible to any rank, so the suite passes on CPU-only
// machines and says so. Otherwise each rank takes its local GPU and the tests
// run as under tests/mpi/mpi_test_main.cc.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "../mpi/run_on_all_ranks.h"
#include "runtime/cuda/device.h"
#include "runtime/world.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ddp::World world;
  const int visible = ddp::cuda::visibleDeviceCount();
  int haveDevice = visible > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &haveDevice, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (haveDevice == 0) {
    if (world.rank() == 0) std::printf("no CUDA device visible: skipped\n");
    return 77;
  }
  ddp::cuda::setDevice(world.localRank() % visible);
  return ddp::testing::runOnAllRanks(world.rank());
}
