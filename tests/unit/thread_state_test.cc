// Thread states from /proc, call stacks captured by signal
// (runtime/thread_state.h), and the names of their frames
// (runtime/symbolize.h). Built with --export-dynamic, as ddp_train is.
#include "runtime/thread_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/symbolize.h"

namespace ddp {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool anyContains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines) {
    if (contains(line, part)) return true;
  }
  return false;
}

}  // namespace
}  // namespace ddp

// Outside any namespace and not inlined: a frame a stack must show by name.
extern "C" __attribute__((noinline)) void ddpTestSleeper(std::atomic<bool>* stop,
                                                         std::atomic<int>* id) {
  id->store(ddp::currentThreadId());
  while (!stop->load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  asm volatile("");  // keeps the frame: no tail call
}

namespace ddp {
namespace {

TEST(DescribeThreadState, NamesTheStateAndWhatItWaitsFor) {
  EXPECT_EQ(describeThreadState({'R', ""}), "running on a CPU");
  EXPECT_EQ(describeThreadState({'S', "hrtimer_nanosleep"}),
            "asleep in the kernel's hrtimer_nanosleep (a timed sleep)");
  EXPECT_EQ(describeThreadState({'S', "futex_wait_queue"}),
            "asleep in the kernel's futex_wait_queue (a lock or a condition variable)");
  EXPECT_EQ(describeThreadState({'S', "do_sys_poll"}),
            "asleep in the kernel's do_sys_poll (waiting on sockets, pipes or other file "
            "descriptors)");
  EXPECT_EQ(describeThreadState({'S', ""}), "asleep");
  EXPECT_EQ(describeThreadState({'D', "nfs_wait_bit_killable"}),
            "blocked in uninterruptible I/O in the kernel's nfs_wait_bit_killable (a disk, a "
            "network file system or a device)");
  EXPECT_EQ(describeThreadState({'T', ""}), "stopped (SIGSTOP, or a debugger)");
}

TEST(ShortFunctionName, DropsParametersAndQualifiers) {
  EXPECT_EQ(shortFunctionName("ddp::Trainer::run(ddp::Observer&) const"), "ddp::Trainer::run");
  EXPECT_EQ(shortFunctionName("f()"), "f");
  EXPECT_EQ(shortFunctionName("S::operator()(int) &&"), "S::operator()");
  EXPECT_EQ(shortFunctionName("g(void (*)(int))"), "g");
  EXPECT_EQ(shortFunctionName("main"), "main");
  // Lambdas by their number and enclosing function, whose parameters and the
  // std::function machinery around them would fill the line.
  EXPECT_EQ(
      shortFunctionName("std::_Function_handler<void (unsigned long), "
                        "ddp::install(ddp::Fault const&, std::function<void (int)>&)::{lambda("
                        "unsigned long)#2}>::_M_invoke(std::_Any_data const&, unsigned "
                        "long&&)"),
      "lambda #2 in ddp::install (through std::function)");
  EXPECT_EQ(shortFunctionName("ddp::install(ddp::Fault const&)::{lambda(unsigned long)#1}::"
                              "operator()(unsigned long) const"),
            "lambda #1 in ddp::install");
  EXPECT_EQ(shortFunctionName("std::_Function_handler<void (), Plain>::_M_invoke(std::_Any_data "
                              "const&)"),
            "std::_Function_handler<void (), Plain>::_M_invoke");
  EXPECT_EQ(shortFunctionName(std::string(300, 'x'), 20), std::string(17, 'x') + "...");
}

// Internal linkage: no dynamic symbol, so only the ELF symbol table names it.
__attribute__((noinline)) int localFunctionForTheSymbolTable(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

TEST(NameOfAddress, NamesExportedAndFileLocalFunctions) {
  EXPECT_EQ(nameOfAddress(reinterpret_cast<const void*>(&ddpTestSleeper)),
            "ddpTestSleeper (thread_state_test)");
  const auto local = reinterpret_cast<const char*>(&localFunctionForTheSymbolTable);
  EXPECT_EQ(nameOfAddress(local + 1),
            "ddp::(anonymous namespace)::localFunctionForTheSymbolTable (thread_state_test)");
  EXPECT_TRUE(
      contains(nameOfAddress(reinterpret_cast<const void*>(&::getpid)), "getpid (libc.so.6)"));
}

TEST(SampleThread, SeesASleepingAndARunningThread) {
  std::atomic<bool> stop{false};
  std::atomic<int> sleeperId{0}, spinnerId{0};
  std::thread sleeper(ddpTestSleeper, &stop, &sleeperId);
  std::thread spinner([&] {
    spinnerId = currentThreadId();
    while (!stop.load()) {
    }
  });
  while (sleeperId == 0 || spinnerId == 0)
    std::this_thread::sleep_for(1ms);
  // A thread between two sleeps is briefly runnable, and on a loaded machine
  // (the spinner holds a core, other tests the rest) it waits for a CPU
  // often: look until it is seen asleep, for up to 10 s, pausing between
  // looks so that it gets a CPU to go back to sleep on.
  bool sawAsleep = false;
  const auto giveUp = std::chrono::steady_clock::now() + 10s;
  while (!sawAsleep && std::chrono::steady_clock::now() < giveUp) {
    std::this_thread::sleep_for(1ms);
    const auto sample = sampleThread(sleeperId);
    ASSERT_TRUE(sample);
    if (sample->state == 'S') {
      sawAsleep = true;
      if (!sample->waitingIn.empty()) {
        EXPECT_TRUE(contains(sample->waitingIn, "sleep"));
      }
    }
  }
  EXPECT_TRUE(sawAsleep);
  const double cpuBefore = processCpuSeconds();
  std::this_thread::sleep_for(200ms);
  const auto spinning = sampleThread(spinnerId);
  ASSERT_TRUE(spinning);
  EXPECT_EQ(spinning->state, 'R');  // on a CPU or on a run queue for one
  EXPECT_GT(processCpuSeconds() - cpuBefore, 0.02);
  stop = true;
  sleeper.join();
  spinner.join();
  EXPECT_FALSE(sampleThread(sleeperId));  // exited
}

TEST(CaptureStack, NamesTheFunctionsOfAnotherThread) {
  installStackCapture();
  std::atomic<bool> stop{false};
  std::atomic<int> id{0};
  std::thread sleeper(ddpTestSleeper, &stop, &id);
  while (id == 0)
    std::this_thread::sleep_for(1ms);
  const std::vector<std::string> frames = captureStack(id, 2s);
  stop = true;
  sleeper.join();
  ASSERT_FALSE(frames.empty());
  EXPECT_TRUE(anyContains(frames, "ddpTestSleeper (thread_state_test)")) << frames.size();
  for (const std::string& frame : frames)
    std::cout << "  " << frame << '\n';
  // Neither the handler nor the signal trampoline is shown.
  EXPECT_FALSE(anyContains(frames, "onStackSignal"));
  EXPECT_FALSE(contains(frames.front(), "__restore_rt"));
}

TEST(CaptureStack, ReachesAThreadBlockedOnALockAndLeavesItBlocked) {
  installStackCapture();
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false, woke = false;
  std::atomic<int> id{0};
  std::thread waiter([&] {
    id = currentThreadId();
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return released; });
    woke = true;
  });
  while (id == 0)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(captureStack(id, 2s).empty());
  {
    std::lock_guard lock(mutex);
    EXPECT_FALSE(woke);  // the signal did not end its wait
    released = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(woke);
}

TEST(CaptureStack, GivesNothingForItsOwnThreadOrAnExitedOne) {
  installStackCapture();
  EXPECT_TRUE(captureStack(currentThreadId(), 100ms).empty());
  std::atomic<int> id{0};
  std::thread([&] { id = currentThreadId(); }).join();
  EXPECT_TRUE(captureStack(id, 100ms).empty());
}

}  // namespace
}  // namespace ddp
