// progress_bench: which way of overlapping a CPU all-reduce with compute works
// best on this machine (issue: "a communication thread, or nonblocking
// collectives with progress"). Each rank runs a fixed compute load (sgemm
// calls, like backward) while one all-reduce of -m MiB is in flight, started
// with the compute:
//   compute   the compute alone (the floor)
//   serial    compute, then a blocking MPI_Allreduce (no overlap)
//   iallreduce MPI_Iallreduce, MPI_Test after every sgemm call, MPI_Wait at the end
//   thread    MpiCommunicator (communication thread) on ordinary memory
//   shm       MpiCommunicator on allocate()d memory (node shared memory, sleeping barrier)
// Prints the median time of each and how much of the all-reduce was hidden:
// hidden = (serial - x) / (serial - compute).
//
//   mpirun -np 2 progress_bench [-m 8] [-r 7]
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/command_line.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/world.h"
#include "trainer/blas_kernels.h"

namespace {

constexpr int kN = 512;  // 512^3 sgemm: ~0.27 GFLOP, a few ms on one core
constexpr int kCalls = 8;

std::vector<float> a(kN*kN, 0.5f), b(kN*kN, 0.25f), c(kN*kN);

void gemm() {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
              kN, 0.0f, c.data(), kN);
}

double timeIt(const std::function<void()>& body) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  body();
  double elapsed = MPI_Wtime() - start, slowest = 0;
  MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest * 1e3;
}

constexpr ddp::bench::ToolText kText{
    "progress_bench", "usage: mpirun -np N progress_bench [-m MIB] [-r REPEATS]\n",
    "Which way of overlapping a CPU all-reduce of -m MiB (default 8) with compute (8\n"
    "sgemm calls, as backward) works best on this machine: the compute alone, then a\n"
    "blocking MPI_Allreduce, MPI_Iallreduce tested between the calls, our communication\n"
    "thread on ordinary memory, and on node shared memory. The median of -r (default\n"
    "7) repeats of each, and how much of the all-reduce was hidden.\n"};

int run(const std::vector<std::string>& args) {
  std::size_t mib = 8;
  int repeats = 7;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    if (args[i] != "-m" && args[i] != "-r")
      throw ddp::bench::BadCommandLine("unknown option " + args[i]);
    if (i + 1 >= args.size()) throw ddp::bench::BadCommandLine(args[i] + " needs a value");
    const int value = ddp::bench::wholeNumber(args[i + 1], 1, args[i]);
    if (args[i] == "-m")
      mib = static_cast<std::size_t>(value);
    else
      repeats = value;
  }
  ddp::trainer::fitBlasKernelsToCpu();  // Note [OpenBLAS kernels on CPUs newer than the library]
  openblas_set_num_threads(1);
  ddp::World world;
  ddp::comm::MpiCommunicator comm(world.comm(), {});
  const std::size_t count = mib * (1 << 20) / sizeof(float);
  std::vector<float> plain(count, 1.0f);
  auto shared = comm.allocate(count * sizeof(float));
  float* shm = static_cast<float*>(shared.get());
  const int n = static_cast<int>(count);

  const std::vector<std::pair<std::string, std::function<void()>>> modes = {
      {"compute",
       [] {
         for (int i = 0; i < kCalls; ++i)
           gemm();
       }},
      {"serial",
       [&] {
         for (int i = 0; i < kCalls; ++i)
           gemm();
         MPI_Allreduce(MPI_IN_PLACE, plain.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
       }},
      {"iallreduce",
       [&] {
         MPI_Request request;
         MPI_Iallreduce(MPI_IN_PLACE, plain.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                        &request);
         int done = 0;
         for (int i = 0; i < kCalls; ++i) {
           gemm();
           if (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
         }
         MPI_Wait(&request, MPI_STATUS_IGNORE);
       }},
      {"thread",
       [&] {
         auto work = comm.allreduce(plain.data(), count, ddp::comm::DataType::kFloat32,
                                    ddp::comm::ReduceOp::kSum);
         for (int i = 0; i < kCalls; ++i)
           gemm();
         work->wait(std::chrono::minutes(1));
       }},
      {"shm",
       [&] {
         auto work =
             comm.allreduce(shm, count, ddp::comm::DataType::kFloat32, ddp::comm::ReduceOp::kSum);
         for (int i = 0; i < kCalls; ++i)
           gemm();
         work->wait(std::chrono::minutes(1));
       }},
  };
  std::vector<std::vector<double>> times(modes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t m = 0; m < modes.size(); ++m)
      times[m].push_back(timeIt(modes[m].second));
  }
  std::vector<double> median;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    median.push_back(t[t.size() / 2]);
  }
  if (world.rank() == 0) {
    std::printf(
        "# progress_bench: %d ranks, %zu MiB all-reduce during %d sgemm(%d) calls, median of %d\n",
        world.size(), mib, kCalls, kN, repeats);
    std::printf("%-8s %10s %8s\n", "mode", "time(ms)", "hidden");
    const double exposed = median[1] - median[0];
    for (std::size_t m = 0; m < modes.size(); ++m) {
      const double hidden = m < 2 ? 0.0 : (median[1] - median[m]) / exposed * 100;
      std::printf("%-8s %10.2f %7.0f%%\n", modes[m].first.c_str(), median[m], hidden);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
