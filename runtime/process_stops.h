// Time this process was stopped, left out of its timeouts.
//
// Note [Time the process was stopped]
// A process can be stopped whole and continued later: Slurm suspends a job
// (scontrol suspend, gang scheduling, preemption by suspension) and LSF's
// bstop with SIGSTOP, Ctrl-Z under mpirun does the same, and so does a
// paused VM. Every rank of a suspended job stops at once and resumes at
// once; nothing was lost, and the job should go on. But each timeout here
// counted on the steady clock, which runs on while the process is stopped:
// on resume, a collective pending across a stop longer than --timeout had
// "timed out", and the watchdog found a rank in compute "with no progress"
// for the whole stop, and ended the job with a false report. So timeouts
// count only time this process ran.
//
// No clock tells that a process was stopped, but a thread that asked to wake
// at a time and wakes much later was not run in between: the kernel does not
// hold a timed wait back for seconds while the process runs (only a machine
// starved that long would, and then counting less is harmless). Every thread
// that waits with a timeout here wakes at least every kLookEvery to look
// (Deadline), and so does the watchdog's checker; a look kLateBy or more
// past its time records the gap as a stop (noteWake), once for every thread,
// and every elapsed time that decides something (a timeout, the watchdog's
// waiting, quiet and heartbeat times) leaves out the stops recorded within
// it (runningSince). The look that finds a stop records it before it
// decides, so a waiter never times out on a stop no thread has recorded yet.
//
// The trainer's own times leave the stops out too (an epoch's time and
// throughput, the phase times, the step rate the stop checks plan with,
// --time-limit's budget, since Slurm moves a suspended job's end as much),
// where a thread has looked by then: a step that ends before any thread has
// woken since the resume still counts its stop, and a pace window with a
// stop in it names no straggler. Rank 0's watchdog says so when it finds a
// stop: "this process was not run for 8.0 s (...)", so that a gap in the log
// has its cause beside it.
//
// A stop of this rank alone (a debugger, kill -STOP of one process) is left
// out of this rank's own times only: its peers, which ran, still see it not
// arrive, and report it stopped (Note [Where a stuck rank is] in
// comm/watchdog.h).
#pragma once

#include <chrono>

namespace ddp::stops {

using Clock = std::chrono::steady_clock;

// The longest a waiter sleeps before it looks at the clock again.
inline constexpr Clock::duration kLookEvery = std::chrono::milliseconds(250);
// A look this late or later: the process was stopped in between.
inline constexpr Clock::duration kLateBy = std::chrono::seconds(2);

// A thread asked to wake at `due` and woke at `woke`: records [due, woke]
// as a stop when that is kLateBy or more. A stop that another thread
// recorded already counts once. Any thread.
void noteWake(Clock::time_point due, Clock::time_point woke);

// The time between `from` and `to` that recorded stops cover. Any thread;
// lock-free while no stop has been recorded.
Clock::duration stoppedBetween(Clock::time_point from, Clock::time_point to);

// to - from, less the stops recorded between them: the time this process
// ran. Any thread.
Clock::duration runningBetween(Clock::time_point from, Clock::time_point to);
// runningBetween(start, Clock::now()).
Clock::duration runningSince(Clock::time_point start);
double runningSecondsSince(Clock::time_point start);

// How many stops were recorded, and their total length. Any thread;
// lock-free while none has been.
int stopCount();
Clock::duration totalStopped();

// A timeout that counts only the time this process ran. The waiter sleeps
// until nextLook() at the latest, then asks passed(). One thread.
class Deadline {
 public:
  explicit Deadline(Clock::duration limit);

  // When to look next: kLookEvery from now, or sooner where the limit
  // comes sooner.
  Clock::time_point nextLook();
  // Looks at the clock (recording a stop if this look is late) and says
  // whether the running time since the start has reached the limit.
  bool passed();
  // The running time left; zero once passed.
  Clock::duration left() const;

 private:
  Clock::duration leftAt(Clock::time_point now) const;

  Clock::time_point start_;
  Clock::duration limit_;
  Clock::time_point due_{};  // the last nextLook(); none before the first
};

}  // namespace ddp::stops
