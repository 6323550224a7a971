// gtest main for tests run under mpirun: starts the World (MPI), then runs
// the tests on every rank (tests/mpi/run_on_all_ranks.h).
#include <gtest/gtest.h>

#include "run_on_all_ranks.h"
#include "runtime/world.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ddp::World world;
  return ddp::testing::runOnAllRanks(world.rank());
}
