// Note [One thread ends the job]: of several threads ending the job at once,
// one reports, tells rank 0 and aborts; the others print nothing.
#include "launcher/job_ending.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/str.h"

namespace ddp::launcher {
namespace {

constexpr int kAborted = 3;

// Four threads end the job at the same moment, each for its own failure;
// each report takes 300 ms, time enough for the others to print theirs.
[[noreturn]] void endFromFourThreads() {
  static std::atomic<int> reported{-1};
  JobEnding ending(
      [](const std::string& why) {
        // The failure told to rank 0 is the one reported.
        if (why != str("failure ", reported.load())) std::_Exit(4);
        std::fprintf(stderr, "told rank 0: %s\n", why.c_str());
      },
      [] { std::_Exit(kAborted); });
  std::latch start(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&ending, &start, i] {
      start.arrive_and_wait();
      ending.end(str("failure ", i), [i] {
        reported = i;
        std::fprintf(stderr, "report %d\n", i);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      });
    });
  }
  for (std::thread& t : threads)
    t.join();  // never returns: the first thread's abort ends the process
  std::_Exit(5);
}

TEST(JobEnding, OfThreadsEndingItAtOnceOneReportsAndTheOthersPrintNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(endFromFourThreads(), ::testing::ExitedWithCode(kAborted),
              "^report [0-3]\ntold rank 0: failure [0-3]\n$");
}

TEST(JobEnding, AReportThatThrowsStillEndsTheJob) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        JobEnding ending(
            [](const std::string& why) { std::fprintf(stderr, "told %s\n", why.c_str()); },
            [] { std::_Exit(kAborted); });
        ending.end("a collective failed", [] { throw std::runtime_error("no peer answered"); });
      },
      ::testing::ExitedWithCode(kAborted),
      "while reporting why the job ends: no peer answered.*told a collective failed");
}

}  // namespace
}  // namespace ddp::launcher
