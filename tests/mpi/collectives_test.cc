// Collectives of the MPI communicator with closed-form results, parameterised
// over element count; the world size is whatever mpirun -np gave (1, 2, 4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "comm/agreement.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/str.h"
#include "test_comm.h"

namespace ddp::comm {
namespace {

class CollectivesTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override { comm_ = makeTestComm(); }
  std::unique_ptr<MpiCommunicator> comm_;
  std::chrono::milliseconds timeout_{60000};
};

TEST_P(CollectivesTest, AllreduceSumOfRanksIsTriangularNumber) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>(r) + static_cast<float>(i % 7);
  comm_->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(timeout_);
  for (std::size_t i = 0; i < count; ++i) {
    const float expected =
        static_cast<float>(n * (n - 1) / 2) + static_cast<float>(n) * static_cast<float>(i % 7);
    ASSERT_EQ(data[i], expected) << "element " << i;
  }
}

TEST_P(CollectivesTest, OutOfPlaceAllreduceLeavesTheSendBufferAlone) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  auto shared = comm_->allocate(count * sizeof(float));
  std::vector<float> plain(count);
  for (float* recv : {plain.data(), static_cast<float*>(shared.get())}) {
    std::vector<float> send(count);
    for (std::size_t i = 0; i < count; ++i)
      send[i] = static_cast<float>(r) + static_cast<float>(i % 3);
    comm_->allreduce(send.data(), recv, count, DataType::kFloat32, ReduceOp::kSum)->wait(timeout_);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(recv[i], static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 3)));
      ASSERT_EQ(send[i], static_cast<float>(r) + static_cast<float>(i % 3));
    }
  }
}

TEST_P(CollectivesTest, AllreduceAverageOfRanks) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  std::vector<double> data(count, static_cast<double>(r));
  comm_->allreduce(std::span<double>(data), ReduceOp::kAvg)->wait(timeout_);
  for (double v : data)
    ASSERT_DOUBLE_EQ(v, (n - 1) / 2.0);
}

TEST_P(CollectivesTest, AllreduceMaxAndMinOfIntegers) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  std::vector<std::int64_t> high(count, r * 10), low(count, r * 10);
  auto a = comm_->allreduce(std::span<std::int64_t>(high), ReduceOp::kMax);
  auto b = comm_->allreduce(std::span<std::int64_t>(low), ReduceOp::kMin);
  a->wait(timeout_);
  b->wait(timeout_);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(high[i], (n - 1) * 10);
    ASSERT_EQ(low[i], 0);
  }
}

TEST_P(CollectivesTest, BroadcastFromEveryRoot) {
  const std::size_t count = GetParam();
  for (int root = 0; root < comm_->size(); ++root) {
    std::vector<std::int32_t> data(count, comm_->rank() == root ? 1000 + root : -1);
    comm_->broadcast(std::span<std::int32_t>(data), root)->wait(timeout_);
    for (std::int32_t v : data)
      ASSERT_EQ(v, 1000 + root);
  }
}

TEST_P(CollectivesTest, AllgatherPlacesEachRankAtItsOffset) {
  const std::size_t count = GetParam();
  const int n = comm_->size();
  std::vector<float> mine(count, static_cast<float>(comm_->rank()));
  std::vector<float> all(count * static_cast<std::size_t>(n), -1.0f);
  comm_->allgather(std::span<const float>(mine), std::span<float>(all))->wait(timeout_);
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(all[r * count + i], static_cast<float>(r));
  }
}

// In place and out of place, in plain memory (MPI_Allgather) and in memory
// from allocate() (Note [Node shared-memory all-gather]), at an offset.
TEST_P(CollectivesTest, AllgatherInEveryMemoryInPlaceOrNot) {
  const std::size_t count = GetParam();
  const std::size_t n = static_cast<std::size_t>(comm_->size());
  const int r = comm_->rank();
  const std::size_t offset = 3;  // elements before the gathered ones
  auto shared = comm_->allocate((offset + count * n) * sizeof(float));
  std::vector<float> plain(offset + count * n);
  for (float* memory : {plain.data(), static_cast<float*>(shared.get())}) {
    for (bool inPlace : {true, false}) {
      float* all = memory + offset;
      std::fill(all, all + count * n, -1.0f);
      std::vector<float> send(count);
      for (std::size_t i = 0; i < count; ++i)
        send[i] = static_cast<float>(100 * r) + static_cast<float>(i % 5);
      float* mine = all + static_cast<std::size_t>(r) * count;
      if (inPlace) std::copy(send.begin(), send.end(), mine);
      comm_->allgather(inPlace ? mine : send.data(), all, count, DataType::kFloat32)
          ->wait(timeout_);
      for (std::size_t q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(all[q * count + i], static_cast<float>(100 * q) + static_cast<float>(i % 5))
              << "rank " << q << ", element " << i << (inPlace ? ", in place" : "");
      }
    }
  }
}

// Uneven parts, the first ranks' smaller, some empty when count is small.
std::vector<std::size_t> unevenBounds(std::size_t count, int n) {
  std::vector<std::size_t> bounds;
  for (int q = 0; q <= n; ++q)
    bounds.push_back(count * static_cast<std::size_t>(q * q) / static_cast<std::size_t>(n * n));
  return bounds;
}

// Each rank's part ends with the sum, where it lies in the buffer, in plain
// memory (MPI_Reduce_scatter) and in memory from allocate() (Note [Node
// shared-memory reduce-scatter]), at an offset into the allocation.
TEST_P(CollectivesTest, ReduceScatterLeavesEachRankItsPartReduced) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  const std::size_t offset = 5;
  auto shared = comm_->allocate((offset + count) * sizeof(float));
  std::vector<float> plain(offset + count);
  const std::vector<std::size_t> bounds = unevenBounds(count, n);
  for (float* memory : {plain.data(), static_cast<float*>(shared.get())}) {
    float* data = memory + offset;
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>(r) + static_cast<float>(i % 7);
    comm_->reduceScatter(data, bounds, DataType::kFloat32, ReduceOp::kSum)->wait(timeout_);
    const auto q = static_cast<std::size_t>(r);
    for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i) {
      ASSERT_EQ(data[i], static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7)))
          << "element " << i << (memory == plain.data() ? " (plain)" : " (shared)");
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterAveragesAndAllowsEveryType) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  const std::vector<std::size_t> bounds = unevenBounds(count, n);
  auto shared = comm_->allocate(count * sizeof(double));
  std::vector<double> plain(count);
  for (double* data : {plain.data(), static_cast<double*>(shared.get())}) {
    std::fill(data, data + count, static_cast<double>(r));
    comm_->reduceScatter(data, bounds, DataType::kFloat64, ReduceOp::kAvg)->wait(timeout_);
    const auto q = static_cast<std::size_t>(r);
    for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i)
      ASSERT_DOUBLE_EQ(data[i], (n - 1) / 2.0);
  }
  std::vector<std::int64_t> high(count, r * 10);
  comm_->reduceScatter(high.data(), bounds, DataType::kInt64, ReduceOp::kMax)->wait(timeout_);
  for (std::size_t i = bounds[static_cast<std::size_t>(r)];
       i < bounds[static_cast<std::size_t>(r) + 1]; ++i)
    ASSERT_EQ(high[i], (n - 1) * 10);
  std::vector<std::int32_t> ints(count, 1);
  EXPECT_THROW(comm_->reduceScatter(ints.data(), bounds, DataType::kInt32, ReduceOp::kAvg),
               UsageError);
  EXPECT_THROW(comm_->reduceScatter(ints.data(), std::vector<std::size_t>{0}, DataType::kInt32,
                                    ReduceOp::kSum),
               InternalError);
}

TEST_P(CollectivesTest, GatherFillsTheRootOnly) {
  const std::size_t count = GetParam();
  const int n = comm_->size(), r = comm_->rank();
  for (int root = 0; root < n; ++root) {
    std::vector<double> mine(count, static_cast<double>(r) + 0.5);
    std::vector<double> all(count * static_cast<std::size_t>(n), -1.0);
    comm_->gather(mine.data(), all.data(), count, DataType::kFloat64, root)->wait(timeout_);
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(all[q * count + i], r == root ? static_cast<double>(q) + 0.5 : -1.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, CollectivesTest, ::testing::Values(1, 7, 1000, 1 << 20),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Note [Sum of squares while reducing]: shared memory (from allocate()) or
// plain memory (MPI_Allreduce, measured on the communication thread).
class SumOfSquaresResult : public ::testing::TestWithParam<bool> {};

TEST_P(SumOfSquaresResult, IsTheResultsAndTheSameBitsOnEveryRank) {
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  options.sumOfSquares = true;
  MpiCommunicator comm(MPI_COMM_WORLD, options);
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = 100003;  // blocks and chunks of every size, one short
  std::vector<float> plain(count);
  auto shared = comm.allocate(count * sizeof(float));
  float* data = GetParam() ? static_cast<float*>(shared.get()) : plain.data();
  // Rank-seeded values whose sums do not come out exact, so that a rank
  // adding in another order would show in the last bits.
  for (std::size_t i = 0; i < count; ++i)
    data[i] = 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i % 13);
  WorkPtr work = comm.allreduce(data, count, DataType::kFloat32, ReduceOp::kSum);
  work->wait(std::chrono::seconds(60));
  ASSERT_TRUE(work->resultChecks().sumOfSquares.has_value());
  long double expected = 0;
  for (std::size_t i = 0; i < count; ++i)
    expected += static_cast<long double>(data[i]) * data[i];  // the result every rank holds
  const double measured = *work->resultChecks().sumOfSquares;
  EXPECT_NEAR(measured, static_cast<double>(expected), 1e-12 * static_cast<double>(expected));
  std::vector<double> all(static_cast<std::size_t>(n));
  comm.allgather(std::span<const double>(&measured, 1), std::span<double>(all))
      ->wait(std::chrono::seconds(60));
  for (int q = 0; q < n; ++q)
    EXPECT_EQ(all[static_cast<std::size_t>(q)], measured) << "rank " << q << " got other bits";
  // Integers and unasked communicators carry no sum.
  std::vector<std::int32_t> ints(8, 1);
  WorkPtr integers = comm.allreduce(std::span<std::int32_t>(ints), ReduceOp::kSum);
  integers->wait(std::chrono::seconds(60));
  EXPECT_FALSE(integers->resultChecks().sumOfSquares.has_value());
  auto unasked = makeTestComm();
  auto unaskedShared = unasked->allocate(16 * sizeof(float));
  for (float* values : {static_cast<float*>(unaskedShared.get()), plain.data()}) {
    WorkPtr quiet = unasked->allreduce(values, 16, DataType::kFloat32, ReduceOp::kSum);
    quiet->wait(std::chrono::seconds(60));
    EXPECT_FALSE(quiet->resultChecks().sumOfSquares.has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(Memory, SumOfSquaresResult, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "shared" : "plain"; });

// Note [Plain collectives in pieces]: past 4 MiB the plain path reduces
// and gathers piece by piece; the result must be the whole closed form,
// with parts that begin and end inside pieces and span their edges.
TEST(Collectives, PlainCollectivesCutIntoPiecesReachEveryElement) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  const std::size_t count = 5 * (std::size_t{1} << 19) + 3;  // 2.5 pieces of floats, and 3
  const auto expected = [&](std::size_t i) {
    return static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7));
  };
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>(r) + static_cast<float>(i % 7);
  std::vector<float> send = data;
  comm->allreduce(send.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum)
      ->wait(std::chrono::seconds(60));
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_EQ(data[i], expected(i)) << "all-reduce, element " << i;
  const std::vector<std::size_t> bounds = unevenBounds(count, n);
  comm->reduceScatter(send.data(), bounds, DataType::kFloat32, ReduceOp::kSum)
      ->wait(std::chrono::seconds(60));
  const auto q = static_cast<std::size_t>(r);
  for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i)
    ASSERT_EQ(send[i], expected(i)) << "reduce-scatter, element " << i;
  // An all-gather of parts of 1.25 pieces and 3, in place and not.
  const std::size_t part = 5 * (std::size_t{1} << 18) + 3;
  const auto ranks = static_cast<std::size_t>(n);
  std::vector<float> all(part * ranks), mine(part);
  for (std::size_t i = 0; i < part; ++i)
    mine[i] = static_cast<float>(1000 * r) + static_cast<float>(i % 11);
  for (const bool inPlace : {true, false}) {
    std::fill(all.begin(), all.end(), -1.0f);
    float* at = all.data() + q * part;
    if (inPlace) std::copy(mine.begin(), mine.end(), at);
    comm->allgather(inPlace ? at : mine.data(), all.data(), part, DataType::kFloat32)
        ->wait(std::chrono::seconds(60));
    for (std::size_t from = 0; from < ranks; ++from) {
      for (std::size_t i = 0; i < part; ++i)
        ASSERT_EQ(all[from * part + i],
                  static_cast<float>(1000 * from) + static_cast<float>(i % 11))
            << "all-gather" << (inPlace ? " in place" : "") << ", rank " << from << ", element "
            << i;
    }
  }
}

// Note [Node shared-memory reduce-scatter]: a rank's part holds the
// all-reduce's bits, and the checks describe the whole result, as the
// all-reduce's do: the same sum of squares, and a NaN in another rank's part
// reported on every rank. Across nodes in two levels (Note [Two-level
// reduce-scatter across nodes]) and in plain memory the ranks add their
// parts' sums, and MPI's reduce-scatter may add the ranks otherwise than its
// all-reduce: within rounding of the all-reduce's, the same bits on every rank.
class ReduceScatterChecks : public ::testing::TestWithParam<bool> {};

TEST_P(ReduceScatterChecks, AreTheWholeResultsOnEveryRank) {
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  options.sumOfSquares = true;
  options.checkNonFinite = true;
  MpiCommunicator comm(MPI_COMM_WORLD, options);
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = 100003;
  // Memory from allocate() is plain across nodes unless they go in two levels.
  const bool shared = GetParam() && (comm.singleNode() || comm.twoLevel());
  auto memory = comm.allocate(2 * count * sizeof(float));
  std::vector<float> plain(2 * count);
  float* reduced = shared ? static_cast<float*>(memory.get()) : plain.data();
  float* scattered = reduced + count;
  for (std::size_t i = 0; i < count; ++i) {
    reduced[i] = 0.1f * static_cast<float>(r + 1) + 1e-3f * static_cast<float>(i % 13);
    scattered[i] = reduced[i];
  }
  const std::vector<std::size_t> bounds = unevenBounds(count, n);
  WorkPtr all = comm.allreduce(reduced, count, DataType::kFloat32, ReduceOp::kAvg);
  WorkPtr parts = comm.reduceScatter(scattered, bounds, DataType::kFloat32, ReduceOp::kAvg);
  all->wait(std::chrono::seconds(60));
  parts->wait(std::chrono::seconds(60));
  const auto q = static_cast<std::size_t>(r);
  if (shared && comm.singleNode()) {
    EXPECT_EQ(std::memcmp(reduced + bounds[q], scattered + bounds[q],
                          (bounds[q + 1] - bounds[q]) * sizeof(float)),
              0)
        << "this rank's part differs from the all-reduce's";
  } else if (shared) {  // across nodes MPI_Reduce_scatter may group the nodes otherwise
    for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i)
      ASSERT_FLOAT_EQ(scattered[i], reduced[i]) << "element " << i;
  }
  ASSERT_TRUE(parts->resultChecks().sumOfSquares.has_value());
  ASSERT_TRUE(parts->resultChecks().nonFinite.has_value());
  EXPECT_FALSE(*parts->resultChecks().nonFinite);
  const double whole = *all->resultChecks().sumOfSquares;
  const double measured = *parts->resultChecks().sumOfSquares;
  if (shared && comm.singleNode()) {
    EXPECT_EQ(measured, whole);
  } else {  // MPI may add the ranks in another order: float32 rounding apart
    EXPECT_NEAR(measured, whole, 1e-6 * whole);
  }
  std::vector<double> everyone(static_cast<std::size_t>(n));
  comm.allgather(std::span<const double>(&measured, 1), std::span<double>(everyone))
      ->wait(std::chrono::seconds(60));
  for (double other : everyone)
    EXPECT_EQ(other, measured) << "ranks got other bits";
  // A NaN on the last rank, in the first rank's part, is seen everywhere.
  for (std::size_t i = 0; i < count; ++i)
    scattered[i] = 1.0f;
  if (r == n - 1) scattered[bounds[1] > 0 ? 0 : count - 1] = std::nanf("");
  WorkPtr poisoned = comm.reduceScatter(scattered, bounds, DataType::kFloat32, ReduceOp::kSum);
  poisoned->wait(std::chrono::seconds(60));
  ASSERT_TRUE(poisoned->resultChecks().nonFinite.has_value());
  EXPECT_TRUE(*poisoned->resultChecks().nonFinite);
}

INSTANTIATE_TEST_SUITE_P(Memory, ReduceScatterChecks, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "shared" : "plain"; });

TEST(Collectives, ManyInFlightCompleteInIssueOrder) {
  auto comm = makeTestComm();
  const int n = comm->size();
  std::vector<std::vector<float>> buffers(32, std::vector<float>(1024));
  std::vector<WorkPtr> works;
  for (std::size_t k = 0; k < buffers.size(); ++k) {
    std::fill(buffers[k].begin(), buffers[k].end(), static_cast<float>(k));
    works.push_back(comm->allreduce(std::span<float>(buffers[k]), ReduceOp::kSum));
  }
  comm->barrier()->wait(std::chrono::seconds(60));
  // The barrier was issued last and runs on the same thread: all are done.
  for (std::size_t k = 0; k < works.size(); ++k) {
    EXPECT_TRUE(works[k]->isCompleted());
    works[k]->wait(std::chrono::seconds(1));
    EXPECT_EQ(buffers[k][5], static_cast<float>(k * n));
  }
}

TEST(Collectives, AverageOfIntegersIsRejected) {
  auto comm = makeTestComm();
  std::vector<std::int32_t> data(4, 1);
  EXPECT_THROW(comm->allreduce(std::span<std::int32_t>(data), ReduceOp::kAvg), UsageError);
}

TEST(Agreement, OneFailingRankStopsEveryRankAndIsNamed) {
  auto comm = makeTestComm();
  const int failing = comm->size() - 1;
  try {
    agree(*comm, [&] {
      if (comm->rank() == failing) throw DataError("file.bin: truncated");
    });
    FAIL() << "agree() returned although rank " << failing << " failed";
  } catch (const PeerFailedError& e) {
    EXPECT_NE(comm->rank(), failing);
    EXPECT_EQ(e.ranks(), std::vector<int>{failing});
    EXPECT_FALSE(e.usage());
    // Note [What a peer's failure says]: the cause, not only who.
    EXPECT_EQ(std::string(e.what()),
              str("stopping: rank ", failing, " failed: file.bin: truncated"));
  } catch (const DataError& e) {
    EXPECT_EQ(comm->rank(), failing);
    EXPECT_STREQ(e.what(), "file.bin: truncated");
    // Every rank knows: ddp_train does not tell a peer that this rank leaves.
    EXPECT_TRUE(e.agreed());
  }
}

// Every rank but 0 fails, each its own way, then all alike: rank 0 hears
// each message (once, when they say the same), and at most four of them.
TEST(Agreement, ThePeersThatFailedSayWhy) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n < 3) GTEST_SKIP() << "needs three ranks";
  std::vector<int> failed;
  std::string each;
  for (int i = 1; i < n; ++i) {
    failed.push_back(i);
    if (i <= 4) each += str(i > 1 ? "; " : "", "rank ", i, ": shard ", i, " is empty");
  }
  const std::string more =
      n > 5 ? str(" (told by the first 4; see the others' messages)") : std::string();
  const auto failing = [&](bool alike) {
    agree(*comm, [&] {
      if (r > 0)
        throw DataError(alike ? std::string("no such file") : str("shard ", r, " is empty"));
    });
  };
  for (const bool alike : {false, true}) {
    try {
      failing(alike);
      FAIL() << "agree() returned";
    } catch (const PeerFailedError& e) {
      ASSERT_EQ(r, 0);
      EXPECT_EQ(e.ranks(), failed);
      EXPECT_EQ(std::string(e.what()), str("stopping: ranks ", join(failed, ", "), " failed: ",
                                           alike ? std::string("no such file") : each, more));
    } catch (const DataError& e) {
      ASSERT_NE(r, 0);
      EXPECT_EQ(std::string(e.what()),
                alike ? std::string("no such file") : str("shard ", r, " is empty"));
    }
  }
}

// Note [Usage errors after start-up]: the peers of ranks that all failed on
// a UsageError learn that it was one; a single other failure among them
// makes it a runtime failure.
TEST(Agreement, PeersLearnWhetherEveryFailureWasAUsageError) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n < 3) GTEST_SKIP() << "needs three ranks";
  for (const bool mixed : {false, true}) {
    try {
      agree(*comm, [&] {
        if (r == 1) throw UsageError("--eval-samples 501 is more than the 500 samples");
        if (r == 2 && mixed) throw DataError("file.bin: truncated");
        if (r == 2) throw UsageError("--eval-samples 501 is more than the 500 samples");
      });
      FAIL() << "agree() returned";
    } catch (const PeerFailedError& e) {
      EXPECT_TRUE(r == 0 || r > 2) << r;
      EXPECT_EQ(e.ranks(), (std::vector<int>{1, 2}));
      EXPECT_EQ(e.usage(), !mixed);
    } catch (const UsageError&) {
      EXPECT_TRUE(r == 1 || (r == 2 && !mixed)) << r;
    } catch (const DataError&) {
      EXPECT_TRUE(r == 2 && mixed) << r;
    }
  }
}

TEST(Agreement, SuccessEverywhereReturnsNormally) {
  auto comm = makeTestComm();
  int ran = 0;
  EXPECT_NO_THROW(agree(*comm, [&] { ++ran; }));
  EXPECT_EQ(ran, 1);
}

TEST(Work, WaitTimesOutWithTheCollectiveNamed) {
  Work work("allreduce #7 on rank 0");
  try {
    work.wait(std::chrono::milliseconds(20));
    FAIL() << "wait() returned on an incomplete Work";
  } catch (const CommTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce #7"), std::string::npos) << e.what();
  }
}

TEST(Work, TheFirstCompletionCounts) {
  Work work("allreduce #3");
  work.complete();
  const Work::TimePoint first = work.completedAt();
  work.complete(std::make_exception_ptr(CommError("aborted after it ran")));
  EXPECT_NO_THROW(work.wait(std::chrono::seconds(1)));
  EXPECT_FALSE(work.hasFailed());
  EXPECT_EQ(work.completedAt(), first);

  Work failed("allreduce #4");
  failed.complete(std::make_exception_ptr(CommError("the peer died")));
  failed.complete();
  EXPECT_THROW(failed.wait(std::chrono::seconds(1)), CommError);
}

TEST(Work, WaitRethrowsTheStoredError) {
  Work work("broadcast #1");
  work.complete(std::make_exception_ptr(CommError("MPI_Bcast failed")));
  EXPECT_TRUE(work.isCompleted());
  EXPECT_THROW(work.wait(std::chrono::seconds(1)), CommError);
}

}  // namespace
}  // namespace ddp::comm

namespace ddp::comm {
namespace {

// Buffers from allocate() take the node shared-memory path (Note [Node
// shared-memory all-reduce]); the results must be the same closed forms.
class SharedMemoryAllreduce : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SharedMemoryAllreduce, SumAverageMaxAtAnOffsetInsideTheAllocation) {
  auto comm = makeTestComm();
  const std::size_t count = GetParam();
  const int n = comm->size(), r = comm->rank();
  auto memory = comm->allocate((count + 40) * sizeof(float));
  ASSERT_NE(memory, nullptr);
  float* buffer = static_cast<float*>(memory.get());
  for (int round = 0; round < 3; ++round) {  // reuse: the barriers must keep rounds apart
    float* data = buffer + 7;                // not at the start, not aligned
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>(r + round) + static_cast<float>(i % 5);
    comm->allreduce(data, count, DataType::kFloat32, ReduceOp::kSum)
        ->wait(std::chrono::seconds(60));
    for (std::size_t i = 0; i < count; ++i) {
      const float expected = static_cast<float>(n * (n - 1) / 2 + n * round) +
                             static_cast<float>(n) * static_cast<float>(i % 5);
      ASSERT_EQ(data[i], expected) << "round " << round << " element " << i;
    }
  }
  auto doubles = comm->allocate(count * sizeof(double));
  auto* d = static_cast<double*>(doubles.get());
  for (std::size_t i = 0; i < count; ++i)
    d[i] = r;
  comm->allreduce(d, count, DataType::kFloat64, ReduceOp::kAvg)->wait(std::chrono::seconds(60));
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_DOUBLE_EQ(d[i], (n - 1) / 2.0);
  for (std::size_t i = 0; i < count; ++i)
    d[i] = r * 10 + static_cast<double>(i % 3);
  comm->allreduce(d, count, DataType::kFloat64, ReduceOp::kMax)->wait(std::chrono::seconds(60));
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_EQ(d[i], (n - 1) * 10 + static_cast<double>(i % 3));
}

INSTANTIATE_TEST_SUITE_P(Sizes, SharedMemoryAllreduce, ::testing::Values(1, 3, 17, 1000, 1 << 20),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Notes [bf16 rounding inside the reduction] and [bf16 rounding between
// nodes]: rounding each rank's float32 values inside the shared-memory
// reduction, or a piece at a time on the communication thread in plain
// memory, gives, bit for bit, what the staged path gives (narrow into
// bfloat16 memory, a kBFloat16 collective, widen), checks included: on
// random rank-seeded values mixed with ties, overflow, subnormals,
// infinities and a NaN on one rank, for sums and averages, all-reduced or
// reduce-scattered (each rank's own part), in one piece and in several.
struct ViaBFloat16Case {
  std::size_t count;
  ReduceOp op;
  bool scatter;
  bool shared;  // memory from allocate() (shared with two ranks or more), or plain
  friend std::ostream& operator<<(std::ostream& out, const ViaBFloat16Case& c) {
    return out << c.count << " x " << reduceOpName(c.op) << (c.scatter ? ", scattered" : "")
               << (c.shared ? ", allocated" : ", plain");
  }
};

class ViaBFloat16 : public ::testing::TestWithParam<ViaBFloat16Case> {};

std::uint32_t bitsOf(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

TEST_P(ViaBFloat16, GivesTheStagedPathsBitsAndChecks) {
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  options.sumOfSquares = true;
  options.checkNonFinite = true;
  MpiCommunicator comm(MPI_COMM_WORLD, options);
  const auto [count, op, scatter, shared] = GetParam();
  const int n = comm.size(), r = comm.rank();
  std::shared_ptr<void> gradients, staging;
  if (shared) {
    gradients = comm.allocate(count * sizeof(float));
    staging = comm.allocate(count * sizeof(std::uint16_t));
  } else {
    gradients = allocateZeroedHost(count * sizeof(float));
    staging = allocateZeroedHost(count * sizeof(std::uint16_t));
  }
  float* data = static_cast<float*>(gradients.get());
  ASSERT_TRUE(comm.reducesViaBFloat16InPlace());

  std::mt19937 random(static_cast<std::uint32_t>(31 + r));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float specials[] = {1.0f + 0x1.0p-8f,  // a tie: rounds to even (down)
                            1.0f + 0x3.0p-8f,  // a tie: rounds to even (up)
                            3.0e38f,           // sums past float32's range
                            0x1.0p-140f,       // subnormal
                            -std::numeric_limits<float>::infinity()};
  for (std::size_t i = 0; i < count; ++i) {
    data[i] = normal(random) * std::ldexp(1.0f, static_cast<int>(i % 40) - 20);
    if (i % 101 == 3) data[i] = specials[(i / 101 + static_cast<std::size_t>(r)) % 5];
  }
  if (count > 50 && r == n - 1) data[count / 2] = std::nanf("");
  std::vector<float> expected(data, data + count);
  auto* rounded = static_cast<std::uint16_t*>(staging.get());
  comm.narrowToBFloat16(expected.data(), rounded, count);

  std::vector<std::size_t> bounds;
  for (int q = 0; q <= n; ++q)  // uneven parts, the first one empty
    bounds.push_back(q == 0 ? 0 : count * static_cast<std::size_t>(q * q) / (n * n));
  const WorkPtr staged = scatter ? comm.reduceScatter(rounded, bounds, DataType::kBFloat16, op)
                                 : comm.allreduce(rounded, count, DataType::kBFloat16, op);
  staged->wait(std::chrono::seconds(60));
  comm.widenFromBFloat16(rounded, expected.data(), count);
  const WorkPtr fused = scatter ? comm.reduceScatterViaBFloat16(data, bounds, op)
                                : comm.allreduceViaBFloat16(data, count, op);
  fused->wait(std::chrono::seconds(60));

  const auto mine = static_cast<std::size_t>(r);
  const std::size_t begin = scatter ? bounds[mine] : 0, end = scatter ? bounds[mine + 1] : count;
  double squares = 0.0;
  for (std::size_t i = begin; i < end; ++i) {
    ASSERT_EQ(bitsOf(data[i]), bitsOf(expected[i]))
        << "element " << i << ": " << data[i] << " against the staged " << expected[i];
    squares += static_cast<double>(data[i]) * data[i];
  }
  // The staged path measures nothing on bfloat16 memory outside shared memory.
  if (staged->resultChecks().nonFinite) {
    EXPECT_EQ(fused->resultChecks().nonFinite, staged->resultChecks().nonFinite);
  }
  EXPECT_EQ(fused->resultChecks().nonFinite.value_or(false), count > 50);
  ASSERT_TRUE(fused->resultChecks().sumOfSquares.has_value());
  if (count <= 50 && (!scatter || n == 1)) {
    EXPECT_NEAR(*fused->resultChecks().sumOfSquares, squares, 1e-12 * squares);
  }

  // In shared memory on one node, a rank that rounds while another does not
  // is a mismatch, not garbage. (Across nodes the other node's ranks would
  // wait in MPI for it: the watchdog's case, not this test's.)
  if (n == 1 || !shared || !comm.singleNode()) return;
  try {
    const WorkPtr work = r == 0 ? comm.allreduceViaBFloat16(data, count, ReduceOp::kSum)
                                : comm.allreduce(data, count, DataType::kFloat32, ReduceOp::kSum);
    work->wait(std::chrono::seconds(60));
    FAIL() << "no error";
  } catch (const MismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
  }
}

// (2 << 20) + 5 elements: two bfloat16 pieces of Note [Plain collectives in pieces].
INSTANTIATE_TEST_SUITE_P(
    Cases, ViaBFloat16,
    ::testing::Values(ViaBFloat16Case{1, ReduceOp::kSum, false, true},
                      ViaBFloat16Case{17, ReduceOp::kAvg, false, true},
                      ViaBFloat16Case{4099, ReduceOp::kSum, false, true},
                      ViaBFloat16Case{(1 << 20) + 3, ReduceOp::kAvg, false, true},
                      ViaBFloat16Case{17, ReduceOp::kSum, true, true},
                      ViaBFloat16Case{(1 << 20) + 3, ReduceOp::kAvg, true, true},
                      ViaBFloat16Case{1, ReduceOp::kSum, false, false},
                      ViaBFloat16Case{17, ReduceOp::kAvg, false, false},
                      ViaBFloat16Case{4099, ReduceOp::kSum, false, false},
                      ViaBFloat16Case{(2 << 20) + 5, ReduceOp::kAvg, false, false},
                      ViaBFloat16Case{17, ReduceOp::kSum, true, false},
                      ViaBFloat16Case{(2 << 20) + 5, ReduceOp::kAvg, true, false},
                      ViaBFloat16Case{(2 << 20) + 5, ReduceOp::kSum, true, false}),
    [](const auto& info) {
      return str("n", info.param.count, info.param.op == ReduceOp::kSum ? "_sum" : "_avg",
                 info.param.scatter ? "_scattered" : "", info.param.shared ? "" : "_plain");
    });

TEST(SharedMemoryAllreduce, RanksThatDisagreeGetAMismatchErrorNotGarbage) {
  auto comm = makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  if (!comm->singleNode()) GTEST_SKIP() << "one node only: across nodes, MPI waits for the others";
  auto memory = comm->allocate(64 * sizeof(float));
  float* data = static_cast<float*>(memory.get());
  const std::size_t count = comm->rank() == 0 ? 32 : 16;  // a diverged program
  try {
    comm->allreduce(data, count, DataType::kFloat32, ReduceOp::kSum)
        ->wait(std::chrono::seconds(60));
    FAIL() << "no error";
  } catch (const MismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
  }
  // The communicator is still usable afterwards.
  comm->allreduce(data, 8, DataType::kFloat32, ReduceOp::kSum)->wait(std::chrono::seconds(60));
}

}  // namespace
}  // namespace ddp::comm

namespace ddp::comm {
namespace {

TEST(SharedMemoryAllreduce, APeerThatNeverArrivesIsATimeoutNotAHang) {
  auto comm = makeTestComm(std::chrono::milliseconds(300));
  if (comm->size() == 1) GTEST_SKIP() << "needs two ranks";
  if (!comm->singleNode()) GTEST_SKIP() << "one node only: across nodes, MPI waits for the others";
  auto memory = comm->allocate(1024 * sizeof(float));
  const bool absent = comm->rank() == comm->size() - 1;  // this rank skips the collective
  if (!absent) {
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->allreduce(static_cast<float*>(memory.get()), 1024, DataType::kFloat32, ReduceOp::kSum)
          ->wait(std::chrono::seconds(30));
      FAIL() << "no timeout";
    } catch (const CommTimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("had not arrived"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the absent rank waits here until the others gave up
}

}  // namespace
}  // namespace ddp::comm
