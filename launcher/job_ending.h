// Ending the job (MPI_Abort) once per process, by the first thread that must.
//
// Note [One thread ends the job]
// Ending the job is a report (the failure, the watchdog's account of every
// peer, the late ranks' stacks), rank 0 told why, then MPI_Abort. More than
// one thread of a rank may set out to do it for one failure:
//   - under NCCL, the NCCL watchdog's thread aborts a communicator whose
//     collective timed out or failed and calls its fatal handler, while
//     the training thread, its kernels released by that abort, meets the
//     same failure at its next call on the communicator a moment later
//     (Note [NCCL watchdog] in comm/nccl/nccl_communicator.h);
//   - the watchdog's checker may find a desync, a peer that has ended or a
//     rank stuck outside collectives as a collective times out on the
//     training thread.
// Each of them printed the whole report, the two interleaved, asked every
// peer for its stack again and told rank 0 twice. So the first thread to
// claim the ending reports and aborts; a later one prints nothing and waits
// there for the process to end. Without a bound: each step of the first
// one's ending is bounded already (the time left to a lower rank reporting
// a timeout, the probe timeouts, rank 0's patience), and a waiter that gave
// up sooner would end the process with its report unsaid.
// Across ranks the same holds by rank 0's hand: telling rank 0 is a claim,
// made before the report, and a rank that another ended the job before
// waits for it, bounded (Note [One rank ends the job] in comm/watchdog.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace ddp::launcher {

class JobEnding {
 public:
  // `tellRankZero(why)`: Note [Telling rank 0 that the job ends] in
  // comm/watchdog.h; returns why the job ends without this rank's report
  // (another rank ended it first, rank 0 has exited), or nullopt when this
  // rank reports (Note [One rank ends the job]). `abort`: ends every rank
  // (World::abort). Neither may throw; `abort` must not return.
  // `endingTime`: how long the job may take to end so (comm::endingTime)
  // before this rank reports after all.
  JobEnding(std::function<std::optional<std::string>(const std::string& why)> tellRankZero,
            std::function<void()> abort, std::chrono::milliseconds endingTime)
      : tellRankZero_(std::move(tellRankZero)), abort_(std::move(abort)), endingTime_(endingTime) {}
  JobEnding(const JobEnding&) = delete;
  JobEnding& operator=(const JobEnding&) = delete;

  // Ends the job because of `why` (one line). The first caller in this
  // process runs `leave` (which may wait, bounded, for a lower rank to
  // report the same failure: Note [One report of a timeout]; may be
  // empty), tells rank 0, runs `report` (prints the failure and whatever
  // explains it; an exception from it is logged) and aborts; when the job
  // ends without its report, it waits up to endingTime for the launcher to
  // end this process before reporting. A later caller,
  // on any other thread, blocks until the first has ended the process. Any
  // thread.
  [[noreturn]] void end(const std::string& why, const std::function<void()>& report,
                        const std::function<void()>& leave = {}) noexcept;

 private:
  std::function<std::optional<std::string>(const std::string&)> tellRankZero_;
  std::function<void()> abort_;
  std::chrono::milliseconds endingTime_;
  std::atomic<bool> claimed_{false};
};

}  // namespace ddp::launcher
