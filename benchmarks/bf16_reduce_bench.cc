// bf16_reduce_bench: what --grad-compression bf16 costs a bucket's
// all-reduce on the MPI backend, against float32, swept over sizes.
//
//   mpirun -np N bf16_reduce_bench [-b 64K] [-e 256M] [-f 4] [-n 10] [-w 2] [--memory shared|plain]
//
// Per size (the float32 gradients' bytes), three ways to average them, each
// issued as the Reducer issues it (Communicator calls, then Work::wait) and
// timed as the median over iterations of the slowest rank:
//   float32   the all-reduce of the gradients themselves;
//   staged    narrowToBFloat16 into a staging buffer, the kBFloat16
//             all-reduce, widenFromBFloat16 back, on the calling thread
//             (what the Reducer does on GPUs);
//   in place  allreduceViaBFloat16: each rank's values rounded inside the
//             node shared-memory sum (Note [bf16 rounding inside the
//             reduction] in comm/communicator.h), or, in plain memory (MPI
//             between nodes), narrowed and widened a piece at a time on the
//             communication thread (Note [bf16 rounding between nodes] in
//             comm/mpi/mpi_communicator.h).
// The buffers come from Communicator::allocate() (--memory shared, the
// Reducer's) or are plain vectors (--memory plain: MPI's path). Rank r
// contributes r + (i % 7) at element i: small integers, exact in bfloat16,
// so every path's sum has the closed form n(n-1)/2 + n(i % 7), checked on
// every element after every call (#wrong; the program exits 1 if any).
// The rounding itself is tested bit for bit elsewhere
// (tests/mpi/collectives_test.cc, ViaBFloat16).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/mpi_bench.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/world.h"

namespace {

using ddp::bench::measure;
using ddp::bench::Measured;
using ddp::comm::DataType;
using ddp::comm::ReduceOp;
constexpr auto kWait = std::chrono::minutes(5);

struct Options : ddp::bench::Sweep {
  bool shared = true;
};

// Throws BadCommandLine, naming what is wrong with the command line.
void parse(const std::vector<std::string>& args, Options& o) {
  using ddp::bench::BadCommandLine;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) throw BadCommandLine(flag + " needs a value");
    const std::string& value = args[i + 1];
    if (o.take(flag, value.c_str())) continue;
    if (flag != "--memory") throw BadCommandLine("unknown flag '" + flag + "'");
    if (value != "shared" && value != "plain")
      throw BadCommandLine("--memory " + value + ": shared or plain");
    o.shared = value == "shared";
  }
  o.check();
}

constexpr ddp::bench::ToolText kText{
    "bf16_reduce_bench",
    "usage: bf16_reduce_bench [-b bytes] [-e bytes] [-f factor] [-n iters] [-w warmup] "
    "[--memory shared|plain]\n",
    "What --grad-compression bf16 costs a bucket's all-reduce on the MPI backend, against\n"
    "float32: per size (the float32 gradients' bytes, -b 64K to -e 256M by -f 4), the\n"
    "float32 all-reduce, the staged bf16 path (narrow, bfloat16 all-reduce, widen, as\n"
    "on GPUs) and the backend's own rounding, each the median of -n 10 iterations\n"
    "(after -w 2) of the slowest rank, each result checked (#wrong; exit 1 if any).\n"
    "--memory shared (the default) takes the Reducer's buffers from\n"
    "Communicator::allocate; plain, ordinary memory (MPI's path, as between nodes).\n"};

int run(const std::vector<std::string>& args) {
  Options o;
  parse(args, o);
  ddp::World world;
  const int n = world.size(), rank = world.rank();
  long anyWrong = 0;
  {
    ddp::comm::MpiCommunicator comm(world.comm(), {});
    const std::size_t most = o.end / sizeof(float);
    std::shared_ptr<void> sharedData, sharedStaging;
    std::vector<float> plainData;
    std::vector<std::uint16_t> plainStaging;
    float* data = nullptr;
    std::uint16_t* staging = nullptr;
    if (o.shared) {
      sharedData = comm.allocate(most * sizeof(float));
      sharedStaging = comm.allocate(most * sizeof(std::uint16_t));
      data = static_cast<float*>(sharedData.get());
      staging = static_cast<std::uint16_t*>(sharedStaging.get());
    } else {
      plainData.resize(most);
      plainStaging.resize(most);
      data = plainData.data();
      staging = plainStaging.data();
    }
    if (rank == 0) {
      std::printf(
          "# bf16_reduce_bench: %d ranks on %d node(s), mpi, %s; float32 gradients "
          "summed three ways, median of %d iterations (after %d warm-up) of the slowest "
          "rank; busbw counts the float32 bytes (2(n-1)/n x size / time)\n",
          n, world.nodeCount(),
          o.shared ? "node shared memory from Communicator::allocate" : "plain memory",
          o.iterations, o.warmup);
      std::printf("#%11s   %10s %8s   %10s %8s %7s   %10s %8s %7s   %6s\n", "", "float32", "",
                  "staged", "bf16", "", "in place", "bf16", "", "");
      std::printf("#%11s   %10s %8s   %10s %8s %7s   %10s %8s %7s   %6s\n", "size", "time(us)",
                  "busbw", "time(us)", "busbw", "/f32", "time(us)", "busbw", "/f32", "#wrong");
    }
    for (std::size_t bytes = o.begin; bytes <= o.end; bytes *= o.factor) {
      const std::size_t count = bytes / sizeof(float);
      std::vector<float> mine(count);
      for (std::size_t i = 0; i < count; ++i)
        mine[i] = static_cast<float>(rank + static_cast<int>(i % 7));
      const auto fill = [&] { std::copy(mine.begin(), mine.end(), data); };
      const auto check = [&] {
        long wrong = 0;
        for (std::size_t i = 0; i < count; ++i)
          wrong += data[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7));
        return wrong;
      };
      const Measured float32 = measure(
          o.iterations, o.warmup, fill,
          [&] { comm.allreduce(data, count, DataType::kFloat32, ReduceOp::kSum)->wait(kWait); },
          check);
      const Measured staged = measure(
          o.iterations, o.warmup, fill,
          [&] {
            comm.narrowToBFloat16(data, staging, count);
            comm.allreduce(staging, count, DataType::kBFloat16, ReduceOp::kSum)->wait(kWait);
            comm.widenFromBFloat16(staging, data, count);
          },
          check);
      const Measured rounded = measure(
          o.iterations, o.warmup, fill,
          [&] { comm.allreduceViaBFloat16(data, count, ReduceOp::kSum)->wait(kWait); }, check);
      anyWrong += float32.wrong + staged.wrong + rounded.wrong;
      if (rank != 0) continue;
      const double bus = n == 1 ? 1.0 : 2.0 * (n - 1) / n;
      const auto busbw = [&](double us) { return static_cast<double>(bytes) / us / 1e3 * bus; };
      std::printf("%12zu   %10.1f %8.2f   %10.1f %8.2f %6.2fx", bytes, float32.micros,
                  busbw(float32.micros), staged.micros, busbw(staged.micros),
                  staged.micros / float32.micros);
      std::printf("   %10.1f %8.2f %6.2fx", rounded.micros, busbw(rounded.micros),
                  rounded.micros / float32.micros);
      std::printf("   %6ld\n", float32.wrong + staged.wrong + rounded.wrong);
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("# wrong results: %ld\n", anyWrong);
  return anyWrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
