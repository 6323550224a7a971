// A time limit on the start-up that comes before the watchdog.
//
// Note [Before the watchdog]
// The watchdog (comm/watchdog.h) needs a communicator, so the stretch before
// it had no limit: MPI_Init, World's first collectives (the node layout),
// the device choice, the communicator's creation (NCCL's ncclCommInitRank)
// and the sharing out of CPUs and host names. Each waits for every rank.
// MPI_Init does too: Open MPI's wire-up ends in a fence over the whole job.
// So one rank that never got there (its node slow to start or load the
// program, a rank that failed before main, a node the others cannot reach)
// left all the others waiting in silence until the job's time limit.
// StartUpDeadline gives that stretch --timeout as well. A thread of its own
// waits for disarm(). Past the limit it writes what the rank was doing, with
// its host, pid and the rank the launcher gave it. Then it ends the process
// (_exit), and mpirun or srun ends the job. Once the watchdog runs, it
// takes over (Note [Where a stuck rank is]).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ddp {

class StartUpDeadline {
 public:
  // Starts the clock; `phase` says what the rank is doing ("MPI_Init"), and
  // `why` what that waits for, for the message. `exitCode` is the process's
  // exit status past the limit.
  StartUpDeadline(std::chrono::milliseconds limit, int exitCode, std::string phase,
                  std::string why);
  StartUpDeadline(const StartUpDeadline&) = delete;
  StartUpDeadline& operator=(const StartUpDeadline&) = delete;
  // Disarms it.
  ~StartUpDeadline();

  // The rank moved on to `phase` (the clock keeps running: the limit is on
  // the whole stretch). Any thread.
  void enter(std::string phase, std::string why);
  // The watchdog has taken over: the thread ends without a word. Idempotent.
  void disarm();

 private:
  void watch();

  const std::chrono::steady_clock::time_point start_;
  const std::chrono::milliseconds limit_;
  const int exitCode_;
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool done_ = false;
  std::string phase_, why_;
  std::thread thread_;
};

}  // namespace ddp
