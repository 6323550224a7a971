#include "runtime/thread_state.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "runtime/error.h"
#include "runtime/str.h"
#include "runtime/symbolize.h"

namespace ddp {
namespace {

constexpr int kMaxFrames = 48;

// One request of captureStack, handed to the handler through gPending: the
// handler takes it (exchanging the pointer for null) before writing, so a
// request the caller gave up on is freed by exactly one side.
struct Capture {
  ThreadId thread = 0;
  void* frames[kMaxFrames] = {};
  int count = 0;
  std::atomic<bool> done{false};
};

std::atomic<Capture*> gPending{nullptr};
std::atomic<bool> gInstalled{false};
std::mutex gCaptureMutex;  // one capture at a time

void onStackSignal(int) {
  const int savedErrno = errno;
  Capture* capture = gPending.load(std::memory_order_acquire);
  // The system call itself: a thread-local's first use is not async-signal-safe.
  if (capture != nullptr && capture->thread == static_cast<ThreadId>(syscall(SYS_gettid)) &&
      gPending.compare_exchange_strong(capture, nullptr)) {
    capture->count = backtrace(capture->frames, kMaxFrames);
    capture->done.store(true, std::memory_order_release);
  }
  errno = savedErrno;
}

}  // namespace

ThreadId currentThreadId() {
  thread_local const ThreadId kThisThread =
      static_cast<ThreadId>(syscall(SYS_gettid));  // once per thread
  return kThisThread;
}

namespace {

// From a /proc task or process directory.
std::optional<ThreadSample> sampleTask(const std::string& dir) {
  std::ifstream stat(dir + "stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // "tid (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  ThreadSample sample;
  sample.state = line[close + 2];
  std::ifstream wchan(dir + "wchan");
  std::getline(wchan, sample.waitingIn);
  if (sample.waitingIn == "0") sample.waitingIn.clear();
  return sample;
}

}  // namespace

std::optional<ThreadSample> sampleThread(ThreadId thread) {
  return sampleTask(str("/proc/self/task/", thread, "/"));
}

std::optional<ThreadSample> sampleProcess(long pid) {
  return sampleTask(str("/proc/", pid, "/"));
}

std::string pidNamespace() {
  char buffer[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

double processCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0.0;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string describeThreadState(const ThreadSample& sample) {
  const std::string& in = sample.waitingIn;
  const std::string where = in.empty() ? "" : str(" in the kernel's ", in);
  switch (sample.state) {
    case 'R':
      return "running on a CPU";
    case 'S': {
      std::string gloss;
      if (in.find("nanosleep") != std::string::npos) {
        gloss = " (a timed sleep)";
      } else if (in.rfind("futex", 0) == 0) {
        gloss = " (a lock or a condition variable)";
      } else if (in.find("poll") != std::string::npos || in.find("select") != std::string::npos) {
        gloss = " (waiting on sockets, pipes or other file descriptors)";
      } else if (in.find("pipe_") != std::string::npos || in.find("sk_wait") != std::string::npos ||
                 in.find("unix_stream") != std::string::npos || in == "wait_woken") {
        gloss = " (reading or writing a pipe or a socket)";
      }
      return str("asleep", where, gloss);
    }
    case 'D':
      return str("blocked in uninterruptible I/O", where,
                 " (a disk, a network file system or a device)");
    case 'T':
      return "stopped (SIGSTOP, or a debugger)";
    case 't':
      return "stopped by a debugger";
    case 'Z':
    case 'X':
      return "exited";
    default:
      return str("in state ", sample.state, where);
  }
}

int stackCaptureSignal() {
  // A real-time signal: those from SIGRTMIN up are the application's (glibc
  // keeps the ones below), and one a few above it stays clear of libraries
  // that take the first.
  return SIGRTMIN + 5;
}

void installStackCapture() {
  if (gInstalled.load()) return;
  void* warmUp[2];
  (void)backtrace(warmUp, 2);  // loads libgcc_s now, not inside the handler
  struct sigaction action {};
  action.sa_handler = onStackSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  DDP_CHECK(sigaction(stackCaptureSignal(), &action, nullptr) == 0,
            str("sigaction(stack capture): ", std::strerror(errno)));
  gInstalled.store(true);
}

std::vector<std::string> captureStack(ThreadId thread, std::chrono::milliseconds wait) {
  std::lock_guard lock(gCaptureMutex);
  if (!gInstalled.load() || thread == currentThreadId()) return {};
  auto* capture = new Capture;
  capture->thread = thread;
  gPending.store(capture, std::memory_order_release);
  // Takes the request back if the handler has not: true when it is ours to free.
  const auto withdraw = [capture] {
    Capture* expected = capture;
    return gPending.compare_exchange_strong(expected, nullptr);
  };
  if (syscall(SYS_tgkill, getpid(), thread, stackCaptureSignal()) != 0) {
    if (withdraw()) delete capture;
    return {};
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!capture->done.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!capture->done.load(std::memory_order_acquire)) {
    // The handler may hold it, mid-backtrace: then it is left to it (a few
    // hundred bytes, once, on a path that ends the job).
    if (withdraw()) delete capture;
    return {};
  }
  // Frame 0 is the handler and frame 1 the kernel's signal trampoline; frame
  // 2 was interrupted at its exact instruction, the rest are return
  // addresses, looked up one byte back so a call at a function's end names
  // its caller.
  std::vector<std::string> frames;
  for (int i = 2; i < capture->count; ++i) {
    auto* address = static_cast<char*>(capture->frames[i]);
    frames.push_back(nameOfAddress(i == 2 ? address : address - 1));
  }
  delete capture;
  // Below main, and below a thread's first unnamed frames, is libc's start-up.
  const auto isMain = [](const std::string& f) { return f.rfind("main (", 0) == 0; };
  if (const auto it = std::find_if(frames.begin(), frames.end(), isMain); it != frames.end())
    frames.erase(it + 1, frames.end());
  while (!frames.empty() && frames.back().rfind("?? ", 0) == 0)
    frames.pop_back();
  return frames;
}

}  // namespace ddp
