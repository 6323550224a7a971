// The end of every gtest main that runs under mpirun: silences the gtest
// printer on ranks > 0 (failures still reach stderr through the rank
// prefix), runs the tests, and returns the worst result of all ranks, so a
// failure on any rank fails the test.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace ddp::testing {

inline int runOnAllRanks(int rank) {
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local = RUN_ALL_TESTS();
  int worst = local;
  MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (local != 0) std::fprintf(stderr, "[r%d] had failing tests\n", rank);
  return worst;
}

}  // namespace ddp::testing
