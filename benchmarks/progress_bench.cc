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

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 8;
  int repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-m") == 0) mib = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "-r") == 0) repeats = std::atoi(argv[i + 1]);
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
