// The run's end line, written once, by whichever thread learns of the end
// first.
//
// Note [One end line, from any thread]
// Rank 0's main thread writes the run's end line (Note [The run's last
// --metrics line] in launcher/run_end.h) when run() returns or it catches
// an error. But the job may also end from another thread: rank 0's
// watchdog, or its status server told by another rank that is ending the
// job (Note [Telling rank 0 that the job ends] in comm/watchdog.h). The
// main thread may then be anywhere: waiting in a collective, stuck on a
// hung file system, even inside a write of the --metrics file. So the
// recorder keeps what the line will say behind a mutex the main thread
// updates as the run goes on, writes the line at most once (the first
// caller wins), and lets a thread that must not wait write it on a thread
// of its own for a bounded time: a write that hangs is left behind, and
// the job ends without the line, as it did before.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "launcher/run_end.h"
#include "runtime/error.h"

namespace ddp::launcher {

class RunEndRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  using Change = std::function<void(RunOutcome&)>;
  using Writer = std::function<void(const RunOutcome&)>;

  // `startedAt`: when ddp_train started, for run_time_s.
  explicit RunEndRecorder(Clock::time_point startedAt) : startedAt_(startedAt) {}
  RunEndRecorder(const RunEndRecorder&) = delete;
  RunEndRecorder& operator=(const RunEndRecorder&) = delete;

  // Rank 0, once its --metrics file is open: `write` appends the line, and
  // `reportedStep` gives the last step reported (an error's last_step).
  // Until then, and on the other ranks, the end functions write nothing.
  // Both are called on the ending thread, `reportedStep` under the
  // recorder's lock (it must not call back into it).
  void setWriter(Writer write, std::function<std::size_t()> reportedStep);
  // Applies `change` to what the line will say. Any thread; never waits on
  // a write.
  void update(const Change& change);
  // Applies `last`, sets run_time_s and writes the line on this thread,
  // unless it was written already (or there is no writer). Returns whether
  // this call wrote it.
  bool end(const Change& last);
  // end() for an error: ended_by "error", exit code `exitCode` (kExitUsage
  // for a usage error that start-up found), `error` as rank 0 logged it,
  // last_step at least the last reported.
  bool endWithError(const std::string& error, int exitCode = kExitFailure);
  // endWithError on a thread of its own, waiting at most `patience` for it:
  // for a thread that must end the job whatever the file system does.
  // Returns whether the line was written in time.
  bool endWithErrorWithin(const std::string& error, std::chrono::milliseconds patience);

 private:
  const Clock::time_point startedAt_;
  std::mutex mutex_;  // the members below; never held across a write
  RunOutcome outcome_;
  Writer write_;
  std::function<std::size_t()> reportedStep_;
  bool claimed_ = false;  // an end function is writing or has written the line
};

}  // namespace ddp::launcher
