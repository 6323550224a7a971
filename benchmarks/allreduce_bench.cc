// allreduce_bench: in-place float32 sum all-reduce, swept over sizes, through
// three paths measured in the same run:
//   shm   Communicator::allreduce on memory from Communicator::allocate()
//         (node shared memory: Note [Node shared-memory all-reduce])
//   plain Communicator::allreduce on ordinary memory (MPI_Allreduce on the
//         communication thread)
//   raw   MPI_Allreduce called directly, for the overhead of our layer
// Every iteration re-initialises the buffer from the rank and checks the
// result, so a wrong result is counted, not hidden.
//
//   mpirun -np N allreduce_bench [-b 8] [-e 64M] [-f 4] [-n iters] [-w warmup]
//
// Columns: time per call in microseconds (median over iterations) and bus
// bandwidth busbw = bytes / time * 2(n-1)/n (the nccl-tests convention), and
// the number of wrong results over all paths.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "runtime/world.h"

namespace {

std::size_t parseSize(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  switch (*end) {
    case 'K':
    case 'k':
      value *= 1 << 10;
      break;
    case 'M':
    case 'm':
      value *= 1 << 20;
      break;
    case 'G':
    case 'g':
      value *= 1 << 30;
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(value);
}

void fill(float* data, std::size_t count, int rank) {
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>(rank + static_cast<int>(i % 7));
}

// Returns 1 if any element differs from the closed form sum over ranks.
int check(const float* data, std::size_t count, int n) {
  for (std::size_t i = 0; i < count; ++i) {
    if (data[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7))) return 1;
  }
  return 0;
}

template <class F>
double medianMicros(int iterations, int warmup, float* data, std::size_t count, int rank, int n,
                    int& wrong, F&& call) {
  std::vector<double> times;
  for (int i = 0; i < warmup + iterations; ++i) {
    fill(data, count, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    call();
    const double elapsed = MPI_Wtime() - start;
    wrong += check(data, count, n);
    if (i >= warmup) times.push_back(elapsed * 1e6);
  }
  // The slowest rank decides when a collective is done.
  std::vector<double> worst(times.size());
  MPI_Allreduce(times.data(), worst.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  std::nth_element(worst.begin(), worst.begin() + static_cast<long>(worst.size() / 2), worst.end());
  return worst[worst.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t begin = 8, end = 64 << 20, factor = 4;
  int iterations = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-b")
      begin = parseSize(argv[i + 1]);
    else if (flag == "-e")
      end = parseSize(argv[i + 1]);
    else if (flag == "-f")
      factor = parseSize(argv[i + 1]);
    else if (flag == "-n")
      iterations = std::atoi(argv[i + 1]);
    else if (flag == "-w")
      warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(
          stderr,
          "usage: allreduce_bench [-b bytes] [-e bytes] [-f factor] [-n iters] [-w warmup]\n");
      return 2;
    }
  }
  ddp::World world;
  ddp::comm::MpiCommunicator comm(world.comm(), {});
  const int n = world.size(), rank = world.rank();
  auto shared = comm.allocate(end);
  std::vector<float> plain(end / sizeof(float) + 1);
  if (rank == 0) {
    std::printf(
        "# allreduce_bench: %d ranks on %d node(s), float32 sum, in place, median of %d (after %d "
        "warm-up)\n",
        n, world.nodeCount(), iterations, warmup);
    std::printf("%12s %12s %12s %10s %12s %10s %12s %10s %8s\n", "bytes", "count", "shm(us)",
                "busbw", "plain(us)", "busbw", "raw(us)", "busbw", "wrong");
  }
  const double busFactor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  for (std::size_t bytes = begin; bytes <= end; bytes *= std::max<std::size_t>(factor, 2)) {
    const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
    int wrong = 0;
    auto* s = static_cast<float*>(shared.get());
    const double shm = medianMicros(iterations, warmup, s, count, rank, n, wrong, [&] {
      comm.allreduce(s, count, ddp::comm::DataType::kFloat32, ddp::comm::ReduceOp::kSum)
          ->wait(std::chrono::minutes(5));
    });
    float* p = plain.data();
    const double viaLayer = medianMicros(iterations, warmup, p, count, rank, n, wrong, [&] {
      comm.allreduce(p, count, ddp::comm::DataType::kFloat32, ddp::comm::ReduceOp::kSum)
          ->wait(std::chrono::minutes(5));
    });
    const double raw = medianMicros(iterations, warmup, p, count, rank, n, wrong, [&] {
      MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    int totalWrong = 0;
    MPI_Allreduce(&wrong, &totalWrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const double b = static_cast<double>(count * sizeof(float));
    auto busbw = [&](double us) { return b / us / 1e3 * busFactor; };
    if (rank == 0) {
      std::printf("%12zu %12zu %12.1f %10.2f %12.1f %10.2f %12.1f %10.2f %8d\n",
                  count * sizeof(float), count, shm, busbw(shm), viaLayer, busbw(viaLayer), raw,
                  busbw(raw), totalWrong);
    }
    if (totalWrong != 0) return 1;
  }
  return 0;
}
