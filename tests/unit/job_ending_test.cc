// Note [One thread ends the job]: of several threads ending the job at once,
// one reports, tells rank 0 and aborts; the others print nothing. Note [One
// rank ends the job] (comm/watchdog.h): a rank that rank 0 says another
// ended the job before waits for that one's abort, and reports only if the
// job still runs after the time allowed.
#include "launcher/job_ending.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/str.h"

namespace ddp::launcher {
namespace {

constexpr int kAborted = 3;
constexpr int kKilled = 6;  // by the launcher, another rank having aborted

// Four threads end the job at the same moment, each for its own failure;
// each report takes 300 ms, time enough for the others to print theirs.
[[noreturn]] void endFromFourThreads() {
  static std::string told;  // by the one thread that gets past the claim
  JobEnding ending(
      [](const std::string& why) -> std::optional<std::string> {
        told = why;
        std::fprintf(stderr, "told rank 0: %s\n", why.c_str());
        return std::nullopt;
      },
      [] { std::_Exit(kAborted); }, std::chrono::seconds(10));
  std::latch start(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&ending, &start, i] {
      start.arrive_and_wait();
      ending.end(str("failure ", i), [i] {
        if (told != str("failure ", i)) std::_Exit(4);  // the failure told is the one reported
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
              "^told rank 0: failure [0-3]\nreport [0-3]\n$");
}

TEST(JobEnding, AReportThatThrowsStillEndsTheJob) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        JobEnding ending(
            [](const std::string& why) -> std::optional<std::string> {
              std::fprintf(stderr, "told %s\n", why.c_str());
              return std::nullopt;
            },
            [] { std::_Exit(kAborted); }, std::chrono::seconds(10));
        ending.end("a collective failed", [] { throw std::runtime_error("no peer answered"); });
      },
      ::testing::ExitedWithCode(kAborted),
      "told a collective failed.*while reporting why the job ends: no peer answered");
}

// What a rank that rank 0 says another ended the job before does, told
// after `leave` has run: waits `endingTime` for the launcher; `killedAfter`
// stands for the first rank's abort reaching this process.
[[noreturn]] void endAfterAnotherRank(std::chrono::milliseconds endingTime,
                                      std::chrono::milliseconds killedAfter) {
  static std::atomic<bool> left{false};
  JobEnding ending(
      [](const std::string&) -> std::optional<std::string> {
        if (!left) std::_Exit(4);  // told before leaving to a lower rank
        return "rank 1 (host-1) ended the job first, and reports it";
      },
      [] { std::_Exit(kAborted); }, endingTime);
  std::thread launcher([killedAfter] {
    std::this_thread::sleep_for(killedAfter);
    std::_Exit(kKilled);
  });
  launcher.detach();
  ending.end(
      "out of memory", [] { std::fprintf(stderr, "report out of memory\n"); }, [] { left = true; });
}

TEST(JobEnding, ARankAnotherEndedTheJobBeforePrintsNoReportWhileTheJobEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EXIT(endAfterAnotherRank(std::chrono::seconds(30), std::chrono::milliseconds(300)),
              ::testing::ExitedWithCode(kKilled), "^$");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
      << "the wait did not end with the process";
}

TEST(JobEnding, ARankAnotherEndedTheJobBeforeReportsWhenTheJobStillRunsAfterItsTime) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      endAfterAnotherRank(std::chrono::milliseconds(300), std::chrono::seconds(30)),
      ::testing::ExitedWithCode(kAborted),
      "^warning: the job did not end within 0.3 s \\(rank 1 \\(host-1\\) ended the job "
      "first, and reports it\\): this rank reports its own failure\nreport out of memory\n$");
}

}  // namespace
}  // namespace ddp::launcher
