// gtest main for tests that need a GPU: exits 77 (Meson's "skipped") when no
// CUDA device is visible, so the suite passes on CPU-only machines and says
// so. Under mpirun it also starts the World and reduces the result over ranks
// as tests/mpi/mpi_test_main.cc does.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

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
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local = RUN_ALL_TESTS();
  int worst = local;
  MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (local != 0) std::fprintf(stderr, "[r%d] had failing tests\n", world.rank());
  return worst;
}
