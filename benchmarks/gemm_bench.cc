// gemm_bench: single-thread sgemm speed of the OpenBLAS kernels that run
// after the fit to the CPU (Note [OpenBLAS kernels on CPUs newer than the
// library] in trainer/blas_kernels.h), on the default MLP's shapes (batch
// 64: forward 64x1024x784, a weight gradient 1024x784x64) and the large
// MLP's (256x4096x4096 stands for its batch of 64 across 4 GEMMs). Best of
// 50 calls per shape; the inputs are filled once. OPENBLAS_CORETYPE, when
// set, is kept, so one run per core compares kernels side by side, the
// first without it (the fit):
//
//   build/benchmarks/gemm_bench; for core in Prescott Haswell SkylakeX Cooperlake; do
//     OPENBLAS_CORETYPE=$core build/benchmarks/gemm_bench; done
//
// (Set but empty, OPENBLAS_CORETYPE names no core, and OpenBLAS then
// chooses by the CPU's vector extensions itself.)
#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "benchmarks/command_line.h"
#include "trainer/blas_kernels.h"

namespace {

constexpr ddp::bench::ToolText kText{
    "gemm_bench",
    "usage: gemm_bench      (OPENBLAS_CORETYPE=NAME gemm_bench: that core's kernels)\n",
    "Single-thread sgemm speed (GFLOP/s, the best of 50 calls) of the OpenBLAS kernels\n"
    "ddp_train runs after fitting them to the CPU, on the default and the large MLP's\n"
    "shapes. With OPENBLAS_CORETYPE set, that core's kernels instead, so that one run\n"
    "per core compares them side by side.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 0);
  const ddp::trainer::BlasKernels kernels = ddp::trainer::fitBlasKernelsToCpu();
  openblas_set_num_threads(1);
  struct Shape {
    int m, n, k;
  };
  constexpr std::array kShapes = {Shape{64, 1024, 784}, Shape{64, 1024, 1024}, Shape{1024, 784, 64},
                                  Shape{256, 4096, 4096}};
  std::printf("# %s, 1 thread, best of 50 calls\n", ddp::trainer::describe(kernels).c_str());
  std::printf("%-16s %10s\n", "m x n x k", "GFLOP/s");
  for (const Shape& s : kShapes) {
    const auto size = [](int rows, int cols) { return static_cast<std::size_t>(rows) * cols; };
    std::vector<float> a(size(s.m, s.k)), b(size(s.k, s.n)), c(size(s.m, s.n));
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] = static_cast<float>(i % 7) * 0.1f;
    for (std::size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<float>(i % 5) * 0.1f;
    double best = 1e30;
    for (int call = 0; call < 50; ++call) {
      const auto start = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                  b.data(), s.n, 0.0f, c.data(), s.n);
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    char shape[32];
    std::snprintf(shape, sizeof shape, "%dx%dx%d", s.m, s.n, s.k);
    std::printf("%-16s %10.1f\n", shape, 2.0 * s.m * s.n * s.k / best / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
