// The Reducer under mpirun: averaged gradients with closed-form values, the
// layout check across ranks, and overlap shown by ordering (a bucket's
// all-reduce starts before backward of the first layer ends), not by timing.
#include "comm/reducer.h"

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "comm/bfloat16.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/error.h"
#include "runtime/str.h"
#include "staging_comm.h"
#include "test_comm.h"
#include "trainer/cross_entropy.h"
#include "trainer/mlp.h"
#include "trainer/random.h"

namespace ddp::comm {
namespace {

class ReducerCaps : public ::testing::TestWithParam<std::size_t> {};

TEST_P(ReducerCaps, EveryBucketEndsWithTheMeanOverRanks) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  std::vector<GradientSpec> specs = {
      {"a", 1000}, {"b", 7}, {"c", 300000}, {"d", 1}, {"frozen", 50, false}};
  Reducer reducer(*comm, specs, {GetParam(), GetParam(), false, GradCompression::kNone, {}});
  for (int step = 0; step < 3; ++step) {
    reducer.prepareForBackward(true);
    for (std::size_t g = specs.size(); g-- > 0;) {
      if (!specs[g].requiresGrad) continue;
      for (std::size_t i = 0; i < specs[g].numel; ++i) {
        reducer.gradient(g)[i] = static_cast<float>(r + step) + static_cast<float>(g);
      }
      reducer.markReady(g);
    }
    reducer.finalize();
    for (std::size_t g = 0; g < specs.size(); ++g) {
      if (!specs[g].requiresGrad) continue;
      const float mean = static_cast<float>(n - 1) / 2 + static_cast<float>(step + g);
      for (float v : reducer.gradient(g))
        ASSERT_FLOAT_EQ(v, mean) << specs[g].name;
    }
  }
  EXPECT_TRUE(reducer.gradient(4).empty());
}

INSTANTIATE_TEST_SUITE_P(Caps, ReducerCaps,
                         ::testing::Values(0, 4096, std::size_t{1} << 20, kSingleBucket),
                         [](const auto& info) {
                           return info.param == kSingleBucket ? std::string("single")
                                                              : "cap" + std::to_string(info.param);
                         });

TEST(Reducer, NoSyncPassesDoNotCommunicate) {
  auto comm = makeTestComm();
  const int r = comm->rank();
  Reducer reducer(*comm, {{"w", 16}}, {});
  reducer.prepareForBackward(false);
  reducer.gradient(0)[0] = static_cast<float>(r);
  reducer.markReady(0);
  reducer.finalize();
  EXPECT_EQ(reducer.gradient(0)[0], static_cast<float>(r));  // untouched: no all-reduce
  EXPECT_TRUE(reducer.launches().empty());
}

// A timeout unwinds the stack through ~Reducer while a bucket is still in
// flight: the destructor must return at once (the report comes next), and the
// collective must still find its buffer alive when the late rank arrives.
TEST(Reducer, DestroyedWithABucketInFlightItReturnsAtOnceAndTheBufferLives) {
  auto comm = makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  const int r = comm->rank();
  constexpr std::size_t kCount = 100000;
  WorkPtr inFlight;
  std::weak_ptr<const void> storage;
  auto reducer =
      std::make_unique<Reducer>(*comm, std::vector<GradientSpec>{{"w", kCount}}, ReducerOptions{});
  storage = reducer->storage();
  reducer->prepareForBackward(true);
  for (float& v : reducer->gradient(0))
    v = static_cast<float>(r);
  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // arrives late
  reducer->markReady(0);
  inFlight = reducer->launches().front().work;
  if (r == 1) reducer->finalize();
  if (r == 0) {
    ASSERT_FALSE(inFlight->isCompleted()) << "rank 1 was meant to arrive late";
  }
  const auto start = std::chrono::steady_clock::now();
  reducer.reset();  // rank 0: without finalize(), as a thrown timeout would leave it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  if (r == 0) {
    EXPECT_FALSE(storage.expired()) << "the in-flight collective's buffer was freed";
  }
  inFlight->wait(std::chrono::seconds(60));
  EXPECT_TRUE(storage.expired()) << "the buffer outlived its collective";
  comm->barrier()->wait(std::chrono::seconds(60));
}

TEST(Reducer, AGradientNeverMarkedReadyIsNamed) {
  auto comm = makeTestComm();
  Reducer reducer(*comm, {{"used", 4}, {"unused", 4}}, {0, 0, false, GradCompression::kNone, {}});
  reducer.prepareForBackward(true);
  reducer.markReady(0);
  try {
    reducer.finalize();
    FAIL() << "finalize() accepted a missing gradient";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'unused'"), std::string::npos) << e.what();
  }
  // Bucket of "used" (issued first) completes; nothing hangs.
}

TEST(Reducer, RanksWithDifferentModelsFailFastOnEveryRank) {
  auto comm = makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<GradientSpec> specs = {{"w", 100}, {"b", 10}};
  if (comm->rank() == 1) specs[0].numel = 101;  // rank 1 built another model
  EXPECT_THROW(Reducer(*comm, specs, {}), MismatchError);
}

// --bucket-cap-mb auto switches caps between steps: the same storage is cut
// into other buckets, every gradient view stays put, and each layout still
// yields the mean.
TEST(Reducer, SetBucketCapsRepartitionsTheSameStorage) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  const std::vector<GradientSpec> specs = {
      {"a", 1000}, {"frozen", 8, false}, {"b", 3000}, {"c", 5}};
  Reducer reducer(*comm, specs, {4096, 4096, false, GradCompression::kNone, {}});
  std::vector<float*> views;
  for (std::size_t g = 0; g < specs.size(); ++g)
    views.push_back(reducer.gradient(g).data());
  const std::vector<std::pair<std::size_t, std::size_t>> caps = {
      {4096, 4096}, {kSingleBucket, kSingleBucket}, {0, 0}, {20, 100000}};
  const std::vector<std::size_t> bucketCounts = {2, 1, 3, 2};
  for (std::size_t step = 0; step < caps.size(); ++step) {
    if (step > 0) reducer.setBucketCaps(caps[step].first, caps[step].second);
    ASSERT_EQ(reducer.buckets().size(), bucketCounts[step]) << "step " << step;
    reducer.prepareForBackward(true);
    for (std::size_t g = specs.size(); g-- > 0;) {
      EXPECT_EQ(reducer.gradient(g).data(), views[g]) << specs[g].name << " moved";
      if (!specs[g].requiresGrad) continue;
      for (float& v : reducer.gradient(g))
        v = static_cast<float>(r * 2 + g + step);
      reducer.markReady(g);
    }
    reducer.finalize();
    EXPECT_EQ(reducer.launches().size(), bucketCounts[step]);
    for (std::size_t g = 0; g < specs.size(); ++g) {
      if (!specs[g].requiresGrad) continue;
      const float mean = static_cast<float>(n - 1) + static_cast<float>(g + step);
      for (float v : reducer.gradient(g))
        ASSERT_FLOAT_EQ(v, mean) << specs[g].name << " at step " << step;
    }
  }
  reducer.prepareForBackward(true);
  EXPECT_THROW(reducer.setBucketCaps(0, 0), InternalError) << "re-bucketed during a pass";
}

TEST(Reducer, RanksThatSwitchToDifferentCapsFailOnEveryRank) {
  auto comm = makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  Reducer reducer(*comm, {{"w", 100}, {"b", 10}}, {0, 0, false, GradCompression::kNone, {}});
  const std::size_t cap = comm->rank() == 1 ? kSingleBucket : 0;
  EXPECT_THROW(reducer.setBucketCaps(cap, cap), MismatchError);
}

TEST(Reducer, BucketAllreduceStartsBeforeBackwardOfTheFirstLayerEnds) {
  auto comm = makeTestComm();
  // A large first layer makes its backward long; cap 0 gives each parameter
  // its own bucket, so the last layer's buckets are issued early.
  auto model = trainer::buildMlp(2048, {2048, 64}, 10, 1);
  std::vector<GradientSpec> specs;
  for (auto* p : model->parameters())
    specs.push_back({p->name, p->value.numel()});
  Reducer reducer(*comm, specs, {0, 0, false, GradCompression::kNone, {}});
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto* p = model->parameters()[i];
    p->grad =
        trainer::Tensor::view(reducer.gradient(i).data(), p->value.shape(), reducer.storage());
  }
  trainer::Tensor x({256, 2048});
  trainer::Random random(3);
  for (float& v : x.span())
    v = random.normal();
  std::vector<std::int32_t> labels(256, 1);
  trainer::SoftmaxCrossEntropy loss;
  loss.forward(model->forward(x), labels);

  std::chrono::steady_clock::time_point firstLayerDone{};
  reducer.prepareForBackward(true);
  model->backward(loss.backward(), trainer::GradMode::kOverwrite,
                  [&](std::size_t layer, trainer::Layer& l) {
                    std::size_t index = 0;
                    for (auto* p : model->parameters()) {
                      for (auto* q : l.parameters()) {
                        if (p == q) reducer.markReady(index);
                      }
                      ++index;
                    }
                    if (layer == 0) firstLayerDone = std::chrono::steady_clock::now();
                  });
  reducer.finalize();
  ASSERT_EQ(reducer.launches().size(), specs.size());
  const auto firstStart = reducer.launches().front().work->startedAt();
  EXPECT_EQ(reducer.launches().front().bucket, 0u);
  EXPECT_LT(firstStart, firstLayerDone)
      << "the first bucket's all-reduce did not start during backward";
}

}  // namespace
}  // namespace ddp::comm

namespace ddp::comm {
namespace {

// One backward pass of two Reducers over the same gradients, `value(g, i)`
// for element i of gradient g, marked ready in reverse order as backward
// does, then finalized.
template <class Value>
void backwardAlike(const std::vector<GradientSpec>& specs, Reducer& x, Reducer& y, Value value) {
  x.prepareForBackward(true);
  y.prepareForBackward(true);
  for (std::size_t g = specs.size(); g-- > 0;) {
    if (!specs[g].requiresGrad) continue;
    for (std::size_t i = 0; i < specs[g].numel; ++i)
      x.gradient(g)[i] = y.gradient(g)[i] = value(g, i);
    x.markReady(g);
    y.markReady(g);
  }
  x.finalize();
  y.finalize();
}

// The bf16 hook against float32 on the same random gradients: the mean of
// rounded values, accumulated in float32, then rounded once more, is within
// 2^-7 of the largest |gradient| on any rank (the error documented in
// comm/reducer.h), and it is not simply equal (the hook really ran).
TEST(Reducer, Bf16CompressionStaysWithinItsDocumentedError) {
  auto comm = makeTestComm();
  const std::size_t n = 100000;
  std::vector<GradientSpec> specs = {{"a", n}, {"b", 1000}};
  Reducer exact(*comm, specs, {0, 0, false, GradCompression::kNone, {}});
  Reducer compressed(*comm, specs, {0, 0, false, GradCompression::kBf16, {}});
  trainer::Random random(static_cast<std::uint64_t>(17 + comm->rank()));
  float largestOf[2] = {0, 0};
  backwardAlike(specs, exact, compressed, [&](std::size_t g, std::size_t) {
    const float v = random.normal() * (g == 0 ? 1e-3f : 10.0f);
    largestOf[g] = std::max(largestOf[g], std::abs(v));
    return v;
  });
  comm->allreduceSync(std::span<float>(largestOf, 2), ReduceOp::kMax);
  for (std::size_t g = 0; g < specs.size(); ++g) {
    float worst = 0, scale = 0;
    for (std::size_t i = 0; i < specs[g].numel; ++i) {
      worst = std::max(worst, std::abs(exact.gradient(g)[i] - compressed.gradient(g)[i]));
      scale = std::max(scale, std::abs(exact.gradient(g)[i]));
    }
    EXPECT_GT(worst, 0.0f) << specs[g].name << ": bf16 gave exactly the float32 result";
    (void)scale;
    EXPECT_LE(worst, largestOf[g] * 0x1.0p-7f) << specs[g].name;
  }
}

// Rank r's part of `elements`: equal parts, the last ones short or empty.
std::vector<std::size_t> equalParts(std::size_t elements, int world) {
  const auto n = static_cast<std::size_t>(world);
  const std::size_t part = (elements + n - 1) / n;
  std::vector<std::size_t> bounds;
  for (std::size_t q = 0; q <= n; ++q)
    bounds.push_back(std::min(elements, q * part));
  return bounds;
}

// The gradients the Reducer reduces: float32, bfloat16 rounded by the MPI
// backend (Notes [bf16 rounding inside the reduction] and [bf16 rounding
// between nodes]), and bfloat16 staged by the Reducer itself, as it does for
// the NCCL backend (through StagingCommunicator).
struct Gradients {
  GradCompression compression;
  bool staged;
  const char* name;
};
constexpr Gradients kGradientKinds[] = {{GradCompression::kNone, false, "float32"},
                                        {GradCompression::kBf16, false, "bf16 rounded by MPI"},
                                        {GradCompression::kBf16, true, "bf16 staged"}};

std::unique_ptr<Communicator> makeComm(const CommOptions& options, bool staged) {
  if (staged) return std::make_unique<StagingCommunicator>(options);
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
}

// Whether every rank runs on this node (as the MPI backend judges it).
bool oneNode() {
  return MpiCommunicator(MPI_COMM_WORLD, CommOptions{}).singleNode();
}

// The Reducer's staged bf16 path (the NCCL backend's) and the MPI backend's
// rounding leave the same bits in every gradient, all-reduced or each
// rank's part reduce-scattered, for any bucket cap, on rank-seeded values
// over many magnitudes.
TEST(Reducer, Bf16StagedAndRoundedByTheBackendGiveTheSameBits) {
  const std::vector<GradientSpec> specs = {{"a", 1000}, {"b", 7}, {"c", 300001}};
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  MpiCommunicator rounding(MPI_COMM_WORLD, options);
  StagingCommunicator staging(options);
  const int n = rounding.size(), r = rounding.rank();
  ASSERT_TRUE(rounding.reducesViaBFloat16InPlace());
  ASSERT_FALSE(staging.reducesViaBFloat16InPlace());
  for (const bool scatter : {false, true}) {
    for (const std::size_t cap : {std::size_t{0}, std::size_t{4096}, kSingleBucket}) {
      const std::vector<std::size_t> bounds =
          scatter ? equalParts(301008, n) : std::vector<std::size_t>{};
      Reducer mpi(rounding, specs, {cap, cap, false, GradCompression::kBf16, bounds});
      Reducer staged(staging, specs, {cap, cap, false, GradCompression::kBf16, bounds});
      trainer::Random random(static_cast<std::uint64_t>(11 + r));
      backwardAlike(specs, mpi, staged, [&](std::size_t, std::size_t i) {
        return random.normal() * std::ldexp(1.0f, static_cast<int>(i % 30) - 15);
      });
      const float* a = static_cast<const float*>(mpi.storage().get());
      const float* b = static_cast<const float*>(staged.storage().get());
      const auto q = static_cast<std::size_t>(r);
      const std::size_t begin = scatter ? bounds[q] : 0, end = scatter ? bounds[q + 1] : 301008;
      for (std::size_t i = begin; i < end; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]))
            << (scatter ? "scattered" : "all-reduced") << ", cap " << cap << ", element " << i;
      }
    }
  }
}

// Reducer::sumOfSquares: the closed form, whether the backend measured each
// bucket (CommOptions::sumOfSquares) or the Reducer scans it, with float32
// or bfloat16 (staged, or rounded inside the reduction: Note [bf16 rounding
// inside the reduction]). Means are x.5 values: every sum is exact.
TEST(Reducer, SumOfSquaresIsTheClosedFormMeasuredOrScanned) {
  for (const bool measured : {true, false}) {
    for (const Gradients kind : kGradientKinds) {
      const GradCompression compression = kind.compression;
      CommOptions options;
      options.timeout = std::chrono::seconds(60);
      options.sumOfSquares = measured;
      const std::unique_ptr<Communicator> owner = makeComm(options, kind.staged);
      Communicator& comm = *owner;
      const int n = comm.size(), r = comm.rank();
      std::vector<GradientSpec> specs = {
          {"a", 1000}, {"b", 7}, {"c", 300001}, {"frozen", 50, false}};
      Reducer reducer(comm, specs, {4096, 4096, false, compression, {}});
      reducer.prepareForBackward(true);
      double expected = 0;
      for (std::size_t g = specs.size(); g-- > 0;) {
        if (!specs[g].requiresGrad) continue;
        for (float& v : reducer.gradient(g))
          v = static_cast<float>(r) + static_cast<float>(g + 1);
        reducer.markReady(g);
        const double mean = (n - 1) / 2.0 + static_cast<double>(g + 1);
        expected += static_cast<double>(specs[g].numel) * mean * mean;
      }
      reducer.finalize();
      EXPECT_EQ(reducer.sumOfSquares(), expected)
          << (measured ? "measured" : "scanned") << ", " << kind.name;
      // Bfloat16 staged by the Reducer: nothing measured (the Reducer scans);
      // rounded by the backend: measured like float32.
      const bool onWork = measured && !kind.staged;
      for (const Reducer::Launch& launch : reducer.launches())
        EXPECT_EQ(launch.work->resultChecks().sumOfSquares.has_value(), onWork) << launch.bucket;
    }
  }
}

// Note [Reduce-scatter for a sharded optimizer]: against an all-reducing
// Reducer on the same rank-seeded gradients, each rank's part holds the same
// bits (one node: the shared-memory path reduces alike; across nodes, float32
// rounding apart: MPI's reduce-scatter may group the nodes otherwise), and
// the checks (sum of squares, the first non-finite gradient) answer alike on
// every rank, whether the backend measured them or the ranks combine their parts.
TEST(ReducerScatter, EachRankGetsTheAllReducesBitsOfItsPartAndTheSameChecks) {
  // Storage order c, b, a: c [0, 300001), b [300001, 300008), a [300008, 301008).
  const std::vector<GradientSpec> specs = {
      {"a", 1000}, {"b", 7}, {"c", 300001}, {"frozen", 50, false}};
  const bool local = oneNode();
  for (const bool measured : {true, false}) {
    for (const Gradients kind : kGradientKinds) {
      const GradCompression compression = kind.compression;
      for (const std::size_t cap : {std::size_t{0}, std::size_t{4096}, kSingleBucket}) {
        CommOptions options;
        options.timeout = std::chrono::seconds(60);
        options.sumOfSquares = measured;
        const std::unique_ptr<Communicator> owner = makeComm(options, kind.staged);
        Communicator& comm = *owner;
        const int n = comm.size(), r = comm.rank();
        const std::vector<std::size_t> bounds = equalParts(301008, n);
        Reducer whole(comm, specs, {cap, cap, false, compression, {}});
        Reducer parts(comm, specs, {cap, cap, false, compression, bounds});
        ASSERT_TRUE(parts.scatters());
        const std::string where =
            str(measured ? "measured" : "scanned", ", ", kind.name, ", cap ", cap);
        trainer::Random random(static_cast<std::uint64_t>(5 + r));
        backwardAlike(specs, whole, parts,
                      [&](std::size_t, std::size_t) { return random.normal(); });
        const float* a = static_cast<const float*>(whole.storage().get());
        const float* b = static_cast<const float*>(parts.storage().get());
        const auto q = static_cast<std::size_t>(r);
        for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i) {
          if (local) {
            ASSERT_EQ(a[i], b[i]) << where << ", element " << i;
          } else {
            ASSERT_FLOAT_EQ(a[i], b[i]) << where << ", element " << i;
          }
        }
        const double expected = whole.sumOfSquares();
        const double got = parts.sumOfSquares();
        if (local && measured && !kind.staged && compression == GradCompression::kNone) {
          EXPECT_EQ(got, expected) << where;  // the buckets' own measurements
        } else {
          EXPECT_NEAR(got, expected, 1e-12 * expected) << where;  // the parts' sums, added
        }
        std::vector<double> everyone(static_cast<std::size_t>(n));
        comm.allgather(std::span<const double>(&got, 1), std::span<double>(everyone))
            ->wait(std::chrono::seconds(60));
        for (double other : everyone)
          EXPECT_EQ(other, got) << where << ": ranks got other bits";
        EXPECT_FALSE(parts.firstNonFinite().has_value()) << where;
      }
    }
  }
}

TEST(ReducerScatter, FirstNonFiniteIsFoundInAnyRanksPartByEveryRank) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  const std::vector<GradientSpec> specs = {{"a", 1000}, {"b", 7}, {"c", 300001}};
  const std::vector<std::size_t> bounds = equalParts(301008, n);
  Reducer parts(*comm, specs, {4096, 4096, false, GradCompression::kNone, bounds});
  Reducer whole(*comm, specs, {4096, 4096, false, GradCompression::kNone, {}});
  for (Reducer* reducer : {&parts, &whole}) {
    reducer->prepareForBackward(true);
    for (std::size_t g = specs.size(); g-- > 0;) {
      for (float& v : reducer->gradient(g))
        v = 1.0f;
      // The last rank poisons b (the last part's) and the start of c (the
      // first part's): every rank must name b, the first in registration order.
      if (r == n - 1 && g != 0) reducer->gradient(g)[0] = std::nanf("");
      reducer->markReady(g);
    }
    reducer->finalize();
    const std::optional<std::size_t> bad = reducer->firstNonFinite();
    ASSERT_TRUE(bad.has_value()) << (reducer == &parts ? "scattered" : "all-reduced");
    EXPECT_EQ(*bad, 1u) << (reducer == &parts ? "scattered" : "all-reduced");
  }
}

TEST(ReducerScatter, RefusesPartsThatDoNotCoverTheStorage) {
  auto comm = makeTestComm();
  const std::vector<GradientSpec> specs = {{"a", 10}};
  std::vector<std::size_t> bounds = equalParts(10, comm->size());
  bounds.back() = 9;
  EXPECT_THROW(Reducer(*comm, specs, {0, 0, false, GradCompression::kNone, bounds}), InternalError);
}

TEST(Collectives, Bf16SumOnPlainMemoryUsesTheMpiPath) {
  auto comm = makeTestComm();
  const int n = comm->size();
  std::vector<std::uint16_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = toBFloat16(static_cast<float>(comm->rank() + i % 4));
  comm->allreduce(data.data(), data.size(), DataType::kBFloat16, ReduceOp::kSum)
      ->wait(std::chrono::seconds(60));
  for (std::size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(fromBFloat16(data[i]),
              static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 4)));
  }
}

}  // namespace
}  // namespace ddp::comm
