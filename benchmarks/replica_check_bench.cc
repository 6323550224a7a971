// replica_check_bench: what the check that the replicas agree costs at each
// epoch's end (Note [Checking that the replicas agree]): the CRC-32 of every
// weight and momentum tensor and one allgather, for the default MLP
// (784-1024-1024-10) and the large one (784-4096-4096-4096-10). Median of
// 11 checks; the step and epoch times it compares with are in RESULTS.md.
//
//   mpirun -np N build/benchmarks/replica_check_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "benchmarks/command_line.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/world.h"
#include "trainer/mlp.h"
#include "trainer/replica_check.h"
#include "trainer/sgd.h"

namespace {

constexpr ddp::bench::ToolText kText{
    "replica_check_bench", "usage: mpirun -np N replica_check_bench\n",
    "What the check that the replicas agree costs at each epoch's end: the CRC-32 of\n"
    "every weight and momentum tensor and one all-gather, for the default MLP and the\n"
    "large one, median of 11 checks.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 0);
  using namespace ddp;
  World world;
  comm::MpiCommunicator comm(world.comm(), comm::CommOptions{});
  const std::vector<std::vector<std::size_t>> models = {{1024, 1024}, {4096, 4096, 4096}};
  for (const auto& hidden : models) {
    const auto model = trainer::buildMlp(784, hidden, 10, 42);
    trainer::Sgd sgd(model->parameters(), {0.1f, 0.9f, 0.0f, false});
    sgd.step();  // the momentum buffers exist from the first step on
    std::size_t parameters = 0;
    for (const trainer::Parameter* p : model->parameters())
      parameters += p->value.numel();
    std::vector<double> ms;
    for (int i = 0; i < 11; ++i) {
      const auto start = std::chrono::steady_clock::now();
      trainer::verifyReplicasAgree(comm, *model, sgd, {}, {1, 1, 0});
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::nth_element(ms.begin(), ms.begin() + 5, ms.end());
    if (world.rank() == 0) {
      std::printf(
          "replica_check_bench: np=%d, %zu parameters (%.1f MiB of weights and momentum): "
          "%.2f ms (median of 11)\n",
          world.size(), parameters, 2.0 * 4.0 * static_cast<double>(parameters) / (1 << 20), ms[5]);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
