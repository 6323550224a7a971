// ParallelFor (runtime/parallel_for.h) and the batch gather on its threads
// (trainer::gatherInParallel): parts cover the range exactly once, in as many
// parts as the grain allows; exceptions come back to the caller; the threads
// are kept and reused; a parallel gather writes what one call writes.
#include "runtime/parallel_for.h"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "trainer/dataset.h"
#include "trainer/synthetic_dataset.h"

namespace ddp {
namespace {

struct Part {
  std::size_t begin, end;
  std::thread::id thread;
};

std::vector<Part> partsOf(ParallelFor& pool, std::size_t count, std::size_t grain) {
  std::mutex mutex;
  std::vector<Part> parts;
  pool.run(count, grain, [&](std::size_t begin, std::size_t end) {
    std::lock_guard lock(mutex);
    parts.push_back({begin, end, std::this_thread::get_id()});
  });
  std::sort(parts.begin(), parts.end(),
            [](const Part& a, const Part& b) { return a.begin < b.begin; });
  return parts;
}

using Case = std::tuple<unsigned /*threads*/, std::size_t /*count*/, std::size_t /*grain*/>;
class ParallelForParts : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelForParts, CoverTheRangeOnceInNearlyEqualParts) {
  const auto [threads, count, grain] = GetParam();
  ParallelFor pool(threads);
  EXPECT_EQ(pool.threads(), std::max(1u, threads));
  const std::vector<Part> parts = partsOf(pool, count, grain);
  if (count == 0) {
    EXPECT_TRUE(parts.empty());
    return;
  }
  // As many parts as the threads and the grain allow, at least one.
  const std::size_t expected = std::min<std::size_t>(
      pool.threads(), std::max<std::size_t>(1, count / std::max<std::size_t>(1, grain)));
  ASSERT_EQ(parts.size(), expected);
  std::size_t next = 0, smallest = count, largest = 0;
  for (const Part& part : parts) {
    EXPECT_EQ(part.begin, next);
    EXPECT_LT(part.begin, part.end);
    next = part.end;
    smallest = std::min(smallest, part.end - part.begin);
    largest = std::max(largest, part.end - part.begin);
  }
  EXPECT_EQ(next, count);
  EXPECT_LE(largest - smallest, 1u);
  if (parts.size() > 1) {
    EXPECT_GE(smallest, std::max<std::size_t>(1, grain));
  }
  // The caller runs the first part; every part runs on a thread of its own.
  EXPECT_EQ(parts.front().thread, std::this_thread::get_id());
  std::set<std::thread::id> threadsUsed;
  for (const Part& part : parts)
    threadsUsed.insert(part.thread);
  EXPECT_EQ(threadsUsed.size(), parts.size());
}

INSTANTIATE_TEST_SUITE_P(ThreadsCountsGrains, ParallelForParts,
                         ::testing::Values(Case{1, 100, 1}, Case{0, 100, 1}, Case{4, 0, 1},
                                           Case{4, 1, 1}, Case{4, 3, 1}, Case{4, 4, 1},
                                           Case{4, 103, 1}, Case{4, 103, 30}, Case{4, 103, 0},
                                           Case{4, 103, 200}, Case{7, 1000, 10},
                                           Case{16, 4096, 83}));

TEST(ParallelFor, KeepsItsThreadsAcrossCalls) {
  ParallelFor pool(3);
  const std::vector<Part> first = partsOf(pool, 300, 1);
  std::set<std::thread::id> before, after;
  for (const Part& part : first)
    before.insert(part.thread);
  for (int call = 0; call < 200; ++call) {
    for (const Part& part : partsOf(pool, 300 + call % 7, 1))
      after.insert(part.thread);
  }
  EXPECT_EQ(before, after);  // the same three threads, none started since
}

TEST(ParallelFor, JobsOfFewerPartsLeaveTheOtherThreadsOut) {
  ParallelFor pool(4);
  // Alternating one-, two- and four-part jobs: a thread left out of one job
  // must take its part of the next.
  std::atomic<std::size_t> total{0};
  for (int call = 0; call < 300; ++call) {
    const std::size_t count = call % 3 == 0 ? 1 : call % 3 == 1 ? 2 : 4;
    pool.run(count, 1, [&](std::size_t begin, std::size_t end) { total += end - begin; });
    ASSERT_EQ(total.exchange(0), count) << "call " << call;
  }
}

TEST(ParallelFor, RethrowsAWorkersExceptionAfterEveryPartReturned) {
  ParallelFor pool(4);
  std::atomic<int> returned{0};
  try {
    pool.run(4, 1, [&](std::size_t begin, std::size_t) {
      if (begin == 2) throw std::runtime_error("part 2 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++returned;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "part 2 failed");
  }
  EXPECT_EQ(returned.load(), 3);
  // The pool works on afterwards, without the old exception.
  EXPECT_EQ(partsOf(pool, 8, 1).size(), 4u);
}

TEST(ParallelFor, RethrowsTheCallersOwnException) {
  ParallelFor pool(2);
  EXPECT_THROW(pool.run(2, 1,
                        [&](std::size_t begin, std::size_t) {
                          if (begin == 0) throw std::logic_error("the caller's part");
                        }),
               std::logic_error);
}

TEST(ParallelFor, WorkersSleepBetweenCalls) {
  ParallelFor pool(3);
  (void)partsOf(pool, 3, 1);
  const auto cpuSeconds = [] {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  };
  const double before = cpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Two spinning workers would take 400 ms of CPU here; waiting, none.
  EXPECT_LT(cpuSeconds() - before, 0.02);
}

}  // namespace

namespace trainer {
namespace {

using GatherCase = std::tuple<unsigned /*threads*/, std::size_t /*batch*/, std::size_t /*dim*/>;
class ParallelGather : public ::testing::TestWithParam<GatherCase> {};

TEST_P(ParallelGather, WritesWhatOneCallWrites) {
  const auto [threads, batch, dim] = GetParam();
  const SyntheticDataset data(5000, dim, 10, 42, 0);
  std::vector<std::size_t> indices(batch);
  std::mt19937_64 random(7);
  for (std::size_t& index : indices)
    index = random() % data.size();
  std::vector<float> expected(batch * dim), features(batch * dim, -1.0f);
  std::vector<std::int32_t> expectedLabels(batch), labels(batch, -1);
  data.gather(indices, expected.data(), expectedLabels.data());
  ParallelFor pool(threads);
  for (int call = 0; call < 3; ++call) {
    std::fill(features.begin(), features.end(), -1.0f);
    gatherInParallel(data, indices, features.data(), labels.data(), pool);
    ASSERT_EQ(features, expected);
    ASSERT_EQ(labels, expectedLabels);
  }
}

// 784 floats a row: kGatherFloatsPerPart / 784 = 334 rows a part at least.
INSTANTIATE_TEST_SUITE_P(ThreadsBatches, ParallelGather,
                         ::testing::Values(GatherCase{1, 256, 784}, GatherCase{4, 1, 784},
                                           GatherCase{4, 100, 784}, GatherCase{4, 1000, 784},
                                           GatherCase{3, 4096, 784}, GatherCase{8, 333, 1},
                                           GatherCase{8, 1000000, 1}));

}  // namespace
}  // namespace trainer
}  // namespace ddp
