// gtest main for tests run under mpirun: starts the World (MPI), silences the
// gtest printer on ranks > 0 (failures still reach stderr through the rank
// prefix), and makes every rank exit with the worst result of all ranks, so a
// failure on any rank fails the test.
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/world.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ddp::World world;
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
