// Note [One end line, from any thread]: the end line is written once, by
// the first thread to end the run, with what the others updated; a write
// that hangs holds a thread that must end the job no longer than its
// patience.
#include "launcher/run_end_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::launcher {
namespace {

using namespace std::chrono_literals;

// The lines a recorder wrote, for any thread.
struct Lines {
  std::mutex mutex;
  std::vector<RunOutcome> written;
  void add(const RunOutcome& o) {
    const std::lock_guard lock(mutex);
    written.push_back(o);
  }
  std::size_t count() {
    const std::lock_guard lock(mutex);
    return written.size();
  }
};

TEST(RunEndRecorder, WritesNothingBeforeItHasAWriter) {
  RunEndRecorder ending(RunEndRecorder::Clock::now());
  EXPECT_FALSE(ending.endWithError("too early"));  // as on every rank but 0
  Lines lines;
  ending.setWriter([&](const RunOutcome& o) { lines.add(o); }, [] { return std::size_t{0}; });
  EXPECT_TRUE(ending.end([](RunOutcome& o) { o.endedBy = "epochs"; }));  // not used up
  EXPECT_EQ(lines.count(), 1u);
}

TEST(RunEndRecorder, TheFirstEndIsTheOnlyLineWithWhatOthersUpdated) {
  const auto started = RunEndRecorder::Clock::now() - 2s;
  RunEndRecorder ending(started);
  Lines lines;
  std::atomic<std::size_t> reported{0};
  ending.setWriter([&](const RunOutcome& o) { lines.add(o); }, [&] { return reported.load(); });
  ending.update([](RunOutcome& o) {
    o.globalStep = 100;  // resumed there
    o.plannedSteps = 500;
    o.checkpoint = "";
  });
  // The checkpoint writer's thread.
  std::thread([&] { ending.update([](RunOutcome& o) { o.checkpoint = "ckpt/120"; }); }).join();
  reported = 130;
  EXPECT_TRUE(ending.endWithError("rank 2 (node7): watchdog: desync"));
  EXPECT_FALSE(ending.endWithError("a second failure"));
  EXPECT_FALSE(ending.end([](RunOutcome& o) { o.endedBy = "epochs"; }));
  ASSERT_EQ(lines.count(), 1u);
  const RunOutcome& line = lines.written.front();
  EXPECT_EQ(line.endedBy, "error");
  EXPECT_EQ(line.exitCode, kExitFailure);
  EXPECT_EQ(line.error, "rank 2 (node7): watchdog: desync");
  EXPECT_EQ(line.globalStep, 130u);  // the last step reported, past the resumed one
  EXPECT_EQ(line.plannedSteps, 500u);
  EXPECT_EQ(line.checkpoint, "ckpt/120");
  EXPECT_GE(line.wallSeconds, 2.0);
  EXPECT_LT(line.wallSeconds, 60.0);
}

TEST(RunEndRecorder, AnErrorNeverTakesTheStepBack) {
  RunEndRecorder ending(RunEndRecorder::Clock::now());
  Lines lines;
  ending.setWriter([&](const RunOutcome& o) { lines.add(o); }, [] { return std::size_t{0}; });
  ending.update([](RunOutcome& o) { o.globalStep = 900; });  // a resumed run, nothing reported yet
  EXPECT_TRUE(ending.endWithError("bad data"));
  ASSERT_EQ(lines.count(), 1u);
  EXPECT_EQ(lines.written.front().globalStep, 900u);
}

// Note [Usage errors after start-up]: the line says the code the job exits with.
TEST(RunEndRecorder, AnErrorKeepsItsExitCode) {
  for (const int code : {kExitFailure, kExitUsage}) {
    RunEndRecorder ending(RunEndRecorder::Clock::now());
    Lines lines;
    ending.setWriter([&](const RunOutcome& o) { lines.add(o); }, [] { return std::size_t{0}; });
    EXPECT_TRUE(code == kExitFailure ? ending.endWithError("bad data")
                                     : ending.endWithError("--eval-samples 501", kExitUsage));
    ASSERT_EQ(lines.count(), 1u);
    EXPECT_EQ(lines.written.front().exitCode, code);
    EXPECT_EQ(lines.written.front().endedBy, "error");
  }
}

TEST(RunEndRecorder, ThreadsEndingAtOnceWriteOneLine) {
  RunEndRecorder ending(RunEndRecorder::Clock::now());
  Lines lines;
  ending.setWriter([&](const RunOutcome& o) { lines.add(o); }, [] { return std::size_t{0}; });
  std::vector<std::thread> threads;
  std::atomic<int> wrote{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      const bool mine = i % 2 == 0 ? ending.endWithError(str("thread ", i))
                                   : ending.endWithErrorWithin(str("thread ", i), 10s);
      wrote += mine ? 1 : 0;
    });
  }
  for (std::thread& t : threads)
    t.join();
  EXPECT_EQ(wrote.load(), 1);
  EXPECT_EQ(lines.count(), 1u);
}

TEST(RunEndRecorder, AWriteThatHangsIsLeftBehindAfterThePatience) {
  RunEndRecorder ending(RunEndRecorder::Clock::now());
  std::promise<void> release;  // the hung file system comes back
  std::shared_future<void> back = release.get_future().share();
  std::atomic<int> writes{0};
  ending.setWriter(
      [&, back](const RunOutcome&) {
        ++writes;
        back.wait();
      },
      [] { return std::size_t{0}; });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ending.endWithErrorWithin("watchdog: stuck", 300ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);
  // The line is claimed: no second one, even once the write goes on.
  EXPECT_FALSE(ending.endWithError("later"));
  release.set_value();
  // A write that finishes in time reports it.
  RunEndRecorder quick(RunEndRecorder::Clock::now());
  Lines lines;
  quick.setWriter([&](const RunOutcome& o) { lines.add(o); }, [] { return std::size_t{0}; });
  EXPECT_TRUE(quick.endWithErrorWithin("watchdog: desync", 10s));
  EXPECT_EQ(lines.count(), 1u);
  // The left-behind write has started (it touches no local of this test
  // once released).
  while (writes.load() == 0)
    std::this_thread::sleep_for(1ms);
}

}  // namespace
}  // namespace ddp::launcher
