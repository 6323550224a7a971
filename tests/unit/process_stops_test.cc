// Note [Time the process was stopped]: a look that comes seconds late
// records a stop, once however many threads find it, and the timeouts
// leave it out; a collective's wait outlasts a stop of the whole process.
#include "runtime/process_stops.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "comm/work.h"
#include "runtime/error.h"

namespace ddp::stops {
namespace {

using namespace std::chrono_literals;

// Times in the past, so that the stops recorded here overlap no wait of
// another test.
TEST(ProcessStops, ALateWakeIsRecordedOnceAndLeftOutOfRunningTime) {
  const int before = stopCount();
  const Clock::duration totalBefore = totalStopped();
  const Clock::time_point t0 = Clock::now() - 60s;
  noteWake(t0, t0 + kLateBy - 1ms);  // late, but not by a stop
  EXPECT_EQ(stopCount(), before);
  noteWake(t0 + 10s, t0 + 13s);
  EXPECT_EQ(stopCount(), before + 1);
  EXPECT_EQ(stoppedBetween(t0, t0 + 20s), 3s);
  EXPECT_EQ(stoppedBetween(t0 + 11s, t0 + 12s), 1s);  // within it
  EXPECT_EQ(stoppedBetween(t0 + 12s, t0 + 20s), 1s);  // its end
  // Another thread's look at the same stop, a little later: only the rest.
  noteWake(t0 + 10100ms, t0 + 13500ms);
  EXPECT_EQ(stopCount(), before + 1);
  EXPECT_EQ(stoppedBetween(t0, t0 + 20s), 3500ms);
  EXPECT_EQ(totalStopped() - totalBefore, 3500ms);
  // Running time since before it: the stop left out.
  const Clock::duration running = runningSince(t0);
  EXPECT_GE(running, 60s - 3500ms);
  EXPECT_LT(running, 60s - 3s);
}

// The look after a sleep 2.25 s past its time (the thread was not run, as
// far as the deadline can tell): the 1.5 s limit is not spent, and the
// deadline passes after the rest of it.
TEST(ProcessStops, ADeadlineLeavesOutALateLook) {
  const int before = stopCount();
  Deadline deadline(1500ms);
  const Clock::time_point due = deadline.nextLook();
  EXPECT_LE(due - Clock::now(), kLookEvery);
  std::this_thread::sleep_until(due + kLateBy + 250ms);
  EXPECT_FALSE(deadline.passed());
  EXPECT_EQ(stopCount(), before + 1);
  EXPECT_GT(deadline.left(), 900ms);
  EXPECT_LT(deadline.left(), 1300ms);
  const Clock::time_point resumed = Clock::now();
  while (!deadline.passed())
    std::this_thread::sleep_until(deadline.nextLook());
  const Clock::duration rest = Clock::now() - resumed;
  EXPECT_GT(rest, 900ms);
  EXPECT_LT(rest, 1600ms);
  EXPECT_EQ(stopCount(), before + 1);  // looks in time record nothing
}

// A child process waits 2.5 s for a collective that completes 4 s in.
// Stopped whole (SIGSTOP, as Slurm suspends a job) for 3 s of it, it ran
// 1 s before the completion: no timeout. Not stopped, it times out.
int waitInChild(bool stop) {
  const pid_t child = fork();
  if (child == 0) {
    comm::Work work("allreduce #0 (test)");
    std::thread completer([&work] {
      std::this_thread::sleep_for(4s);
      work.complete();
    });
    int code = 0;
    try {
      work.wait(2500ms);
    } catch (const CommTimeoutError&) {
      code = 3;
    }
    completer.join();
    _exit(code);
  }
  if (stop) {
    std::this_thread::sleep_for(300ms);
    kill(child, SIGSTOP);
    std::this_thread::sleep_for(3s);
    kill(child, SIGCONT);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ProcessStops, ACollectiveWaitOutlastsAStopOfTheWholeProcess) {
  EXPECT_EQ(waitInChild(/*stop=*/true), 0) << "the wait timed out over the stop";
  EXPECT_EQ(waitInChild(/*stop=*/false), 3) << "no timeout without the stop";
}

}  // namespace
}  // namespace ddp::stops
