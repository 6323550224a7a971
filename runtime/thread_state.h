// What a thread of this process is doing, as the kernel sees it, and where
// its call stack is: for the watchdog's reports of a rank that is in no
// collective (Note [Where a stuck rank is] in comm/watchdog.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// A kernel thread id (gettid), as /proc/self/task/<id> names it.
using ThreadId = int;

// The calling thread's id. Any thread.
ThreadId currentThreadId();

// One look at a thread, from /proc/self/task/<id>/{stat,wchan}.
struct ThreadSample {
  char state = '?';       // R running, S sleeping, D uninterruptible, T stopped, ...
  std::string waitingIn;  // the kernel function it sleeps in (wchan); "" when running or hidden
};

// nullopt when the thread has exited or /proc cannot be read. Any thread.
std::optional<ThreadSample> sampleThread(ThreadId thread);
// The same for the main thread of process `pid` (another process of this
// node, in this pid namespace); nullopt when it has exited.
std::optional<ThreadSample> sampleProcess(long pid);

// Names this process's pid namespace ("pid:[4026531836]"), so that two
// processes can tell whether each other's pids mean anything to them; ""
// when unknown.
std::string pidNamespace();

// CPU time of the whole process, every thread, user and system (getrusage),
// in seconds. Any thread.
double processCpuSeconds();

// The sample in words: "running on a CPU", "asleep in the kernel's
// hrtimer_nanosleep (a timed sleep)", "blocked in uninterruptible I/O in
// nfs_wait_bit_killable (a disk, a network file system or a device)". Pure.
std::string describeThreadState(const ThreadSample& sample);

// Makes captureStack work: installs the handler of kStackSignal and loads
// what the unwinder needs (loading it inside a signal handler could
// deadlock). Any thread; idempotent. Throws InternalError if the handler cannot be installed.
void installStackCapture();

// The real-time signal captureStack sends, chosen clear of those MPI, PMIx
// and the CUDA runtime use; its handler returns at once for any other thread.
int stackCaptureSignal();

// The call stack of thread `thread` of this process, innermost frame first,
// one "function (library)" string per frame; empty when the thread did not
// run its handler within `wait` (blocked in uninterruptible I/O, stopped, or
// installStackCapture not called). The thread is interrupted for the time of
// one backtrace() and then resumes; a system call it was in is restarted
// (SA_RESTART), though a few (poll, nanosleep) return EINTR instead, so call
// this only where the job is about to end. Serialised; any thread but
// `thread` itself; never throws.
std::vector<std::string> captureStack(ThreadId thread, std::chrono::milliseconds wait);

}  // namespace ddp
