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
// takes over (Note [Where a stuck rank is]). The limit is never below
// kMinStartUpLimit. A cold start is slow: 3 ranks on 2 cores, just after the
// packages were installed, spent more than 4 s in MPI_Init (found by
// tests/e2e/faults.sh in a fresh root). A short --timeout meant for
// collectives must not cut that.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ddp {

inline constexpr std::chrono::seconds kMinStartUpLimit{30};

class StartUpDeadline {
 public:
  // Starts the clock; `limitName` says where the limit comes from
  // ("--timeout"), `phase` what the rank is doing ("MPI_Init") and `why`
  // what that waits for, for the message. `exitCode` is the process's exit
  // status past the limit. The caller applies kMinStartUpLimit.
  StartUpDeadline(std::chrono::milliseconds limit, std::string limitName, int exitCode,
                  std::string phase, std::string why);
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
  const std::string limitName_;
  const int exitCode_;
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool done_ = false;
  std::string phase_, why_;
  std::thread thread_;
};

}  // namespace ddp
