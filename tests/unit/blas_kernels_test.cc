// OpenBLAS's kernels fitted to the CPU (Note [OpenBLAS kernels on CPUs newer
// than the library] in trainer/blas_kernels.h).
#include "trainer/blas_kernels.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddp::trainer {
namespace {

TEST(BlasKernels, AFallbackCoreGivesWayOnACpuWithAvx2) {
  EXPECT_EQ(betterBlasCore("Prescott", VectorLevel::kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(betterBlasCore("Prescott", VectorLevel::kAvx512), "SkylakeX");
  EXPECT_EQ(betterBlasCore("Prescott", VectorLevel::kAvx2), "Haswell");
  EXPECT_EQ(betterBlasCore("Barcelona", VectorLevel::kAvx2), "Haswell");  // an unknown AMD
  EXPECT_EQ(betterBlasCore("Sandybridge", VectorLevel::kAvx512), "SkylakeX");
  EXPECT_EQ(betterBlasCore("prescott", VectorLevel::kAvx2), "Haswell");  // OpenBLAS ignores case
}

TEST(BlasKernels, AChoiceOfAvx2OrWiderIsKept) {
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(betterBlasCore(core, VectorLevel::kAvx512Bf16), "") << core;
  }
}

TEST(BlasKernels, NothingChangesOnACpuWithoutAvx2OrForAnUnknownCore) {
  EXPECT_EQ(betterBlasCore("Prescott", VectorLevel::kBelowAvx2), "");
  EXPECT_EQ(betterBlasCore("Nehalem", VectorLevel::kBelowAvx2), "");
  EXPECT_EQ(betterBlasCore("GraniteRapids", VectorLevel::kAvx512), "");
  EXPECT_EQ(betterBlasCore("", VectorLevel::kAvx512), "");
}

TEST(BlasKernels, CoresAreSortedByTheirVectorUnits) {
  EXPECT_EQ(coreVectorLevel("Prescott"), VectorLevel::kBelowAvx2);
  EXPECT_EQ(coreVectorLevel("sandybridge"), VectorLevel::kBelowAvx2);
  EXPECT_EQ(coreVectorLevel("Haswell"), VectorLevel::kAvx2);
  EXPECT_EQ(coreVectorLevel("ZEN"), VectorLevel::kAvx2);
  EXPECT_EQ(coreVectorLevel("SkylakeX"), VectorLevel::kAvx512);
  EXPECT_EQ(coreVectorLevel("Cooperlake"), VectorLevel::kAvx512Bf16);
  EXPECT_EQ(coreVectorLevel("GraniteRapids"), std::nullopt);
  EXPECT_EQ(coreVectorLevel(""), std::nullopt);
}

BlasKernels kernels(std::string core, std::string userCore, VectorLevel cpu) {
  return {"OpenBLAS 0.3.21", std::move(core), "", std::move(userCore), cpu};
}

// Note [OpenBLAS kernels on CPUs newer than the library]: the user's choice
// is kept, and the start-up line says when it is narrower than the CPU.
TEST(BlasKernels, TheDescriptionSaysWhenTheUsersKernelsAreNarrowerThanTheCpu) {
  EXPECT_EQ(describe(kernels("Haswell", "Haswell", VectorLevel::kAvx512)),
            "OpenBLAS 0.3.21, Haswell kernels (OPENBLAS_CORETYPE=Haswell: AVX2 kernels on a CPU "
            "with AVX-512)");
  EXPECT_EQ(describe(kernels("Prescott", "prescott", VectorLevel::kAvx2)),
            "OpenBLAS 0.3.21, Prescott kernels (OPENBLAS_CORETYPE=prescott: less than AVX2 "
            "kernels on a CPU with AVX2)");
  // As wide as the CPU (AVX-512 with or without BF16: the same sgemm).
  for (VectorLevel cpu : {VectorLevel::kAvx512, VectorLevel::kAvx512Bf16}) {
    EXPECT_EQ(describe(kernels("SkylakeX", "SkylakeX", cpu)), "OpenBLAS 0.3.21, SkylakeX kernels");
    EXPECT_EQ(describe(kernels("Cooperlake", "Cooperlake", cpu)),
              "OpenBLAS 0.3.21, Cooperlake kernels");
  }
  EXPECT_EQ(describe(kernels("Haswell", "Haswell", VectorLevel::kAvx2)),
            "OpenBLAS 0.3.21, Haswell kernels");
  // The library's own choice, and a core this file does not know, are not judged.
  EXPECT_EQ(describe(kernels("Haswell", "", VectorLevel::kAvx512)),
            "OpenBLAS 0.3.21, Haswell kernels");
  EXPECT_EQ(describe(kernels("GraniteRapids", "GraniteRapids", VectorLevel::kAvx512)),
            "OpenBLAS 0.3.21, GraniteRapids kernels");
}

// On this machine: whatever OpenBLAS chose when it loaded, the kernels that
// run afterwards use AVX2 or wider wherever the CPU has it. (Debian 12's
// OpenBLAS takes an Emerald Rapids Xeon for a Prescott.)
TEST(BlasKernels, TheKernelsThatRunUseTheCpusVectorUnits) {
  const char* userChoice = std::getenv("OPENBLAS_CORETYPE");
  if (userChoice != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE=" << userChoice << " is kept";
  const BlasKernels kernels = fitBlasKernelsToCpu();
  EXPECT_EQ(kernels.core, openblas_get_corename());
  EXPECT_EQ(kernels.library.rfind("OpenBLAS ", 0), 0u) << kernels.library;
  EXPECT_EQ(betterBlasCore(kernels.core, cpuVectorLevel()), "")
      << "still " << kernels.core << " on a CPU with AVX2 (" << describe(kernels) << ")";
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr) << "the variable is left behind";
  EXPECT_EQ(describe(blasKernels()), describe(kernels));
  EXPECT_EQ(describe(fitBlasKernelsToCpu()), describe(kernels)) << "a second fit changed it";
}

// The kernels chosen again compute what the first ones did: a GEMM whose
// shape has remainders in every blocking, against a double-precision loop.
TEST(BlasKernels, GemmIsRightAfterTheFit) {
  fitBlasKernelsToCpu();
  const int m = 67, n = 131, k = 259;
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n),
      c(static_cast<std::size_t>(m) * n, -1.0f);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 4.0f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
              0.0f, c.data(), n);
  int wrong = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double expected = 0;
      for (int p = 0; p < k; ++p)
        expected += double{a[static_cast<std::size_t>(i) * k + p]} *
                    double{b[static_cast<std::size_t>(p) * n + j]};
      if (std::abs(c[static_cast<std::size_t>(i) * n + j] - expected) >
          1e-4 * (1 + std::abs(expected)))
        ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << "on " << describe(blasKernels());
}

}  // namespace
}  // namespace ddp::trainer
