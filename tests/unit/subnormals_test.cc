// Note [Subnormal floats]: with flushing set, a subnormal result is 0 and a
// subnormal input counts as 0, on the thread that set it, on the threads it
// starts afterwards, and in OpenBLAS's threads once they are restarted.
#include "runtime/subnormals.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <vector>

#include "trainer/blas_kernels.h"

namespace ddp {
namespace {

constexpr float kSubnormal = 1e-40f;  // below 2^-126, above the smallest (1.4e-45)

// Through volatile, so that the compiler cannot compute it at build time.
float timesOne(float x) {
  volatile float v = x, one = 1.0f;
  return v * one;
}
float square(float x) {
  volatile float v = x;
  return v * v;
}

// Restores the test process's mode (IEEE: keep) whatever a test did.
class SubnormalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!setFlushSubnormals(false)) GTEST_SKIP() << "no flushing on this CPU";
  }
  void TearDown() override {
    setFlushSubnormals(false);
    trainer::restartBlasThreads();
  }
};

TEST_F(SubnormalsTest, KeptByDefaultFlushedWhenSet) {
  EXPECT_FALSE(flushesSubnormals());
  EXPECT_EQ(timesOne(kSubnormal), kSubnormal);
  EXPECT_GT(square(1e-20f), 0.0f);  // 1e-40: a subnormal result

  ASSERT_TRUE(setFlushSubnormals(true));
  EXPECT_TRUE(flushesSubnormals());
  EXPECT_EQ(timesOne(kSubnormal), 0.0f) << "a subnormal input was not read as 0";
  EXPECT_EQ(square(1e-20f), 0.0f) << "a subnormal result was not flushed";
  EXPECT_GT(square(1e-18f), 0.0f) << "a normal result (1e-36) was flushed";

  setFlushSubnormals(false);
  EXPECT_FALSE(flushesSubnormals());
  EXPECT_EQ(timesOne(kSubnormal), kSubnormal);
}

TEST_F(SubnormalsTest, ThreadsStartedLaterTakeTheMode) {
  setFlushSubnormals(true);
  bool flushes = false;
  float product = -1;
  std::thread([&] {
    flushes = flushesSubnormals();
    product = timesOne(kSubnormal);
  }).join();
  EXPECT_TRUE(flushes);
  EXPECT_EQ(product, 0.0f);
}

// C = A B with A all subnormal and B all 2^100: each element sums n products
// of about 1.3e-10 (normal), or 0 where the subnormal inputs are read as 0.
// A product this large is split among OpenBLAS's threads.
std::size_t nonZeroElements(int threads) {
  constexpr int kN = 256;
  openblas_set_num_threads(threads);
  const std::vector<float> a(kN * kN, kSubnormal), b(kN * kN, 0x1p100f);
  std::vector<float> c(kN * kN, -1.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
              kN, 0.0f, c.data(), kN);
  std::size_t nonZero = 0;
  for (const float x : c)
    nonZero += x != 0.0f ? 1 : 0;
  return nonZero;
}

TEST_F(SubnormalsTest, BlasThreadsTakeTheModeWhenRestarted) {
  ASSERT_TRUE(trainer::restartBlasThreads()) << "this OpenBLAS has no blas_thread_shutdown_";
  EXPECT_EQ(nonZeroElements(2), std::size_t{256 * 256}) << "kept: every element is a sum";

  // OpenBLAS started its threads when it loaded; only a restart gives them
  // the main thread's mode.
  setFlushSubnormals(true);
  trainer::restartBlasThreads();
  EXPECT_EQ(nonZeroElements(2), 0u) << "an OpenBLAS thread computed with subnormals";
  EXPECT_EQ(nonZeroElements(4), 0u) << "a thread added afterwards computed with subnormals";
}

}  // namespace
}  // namespace ddp
