// A program outside the ddp tree, built against the installed headers and
// library through pkg-config (tests/e2e/install.sh): proves the installed
// package is usable on its own.
#include <ddp/comm/mpi/mpi_communicator.h>  // or <comm/mpi/mpi_communicator.h>
#include <ddp/runtime/world.h>

#include <cstdio>
#include <vector>

int main() {
  ddp::World world;
  ddp::comm::MpiCommunicator comm(world.comm(), {});
  std::vector<float> values(16, static_cast<float>(world.rank() + 1));
  comm.allreduceSync(std::span<float>(values), ddp::comm::ReduceOp::kSum);
  const int n = world.size();
  const bool ok = values[0] == static_cast<float>(n * (n + 1) / 2);
  if (world.rank() == 0)
    std::printf("consumer: sum over %d ranks = %g (%s)\n", n, values[0], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
