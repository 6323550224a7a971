// --time-limit: a run that stops, with its checkpoint written, before a
// wall-clock budget runs out.
//
// Note [Stopping before a time limit]
// A scheduler ends a job at its time limit, and not every one warns first:
// Slurm sends a signal only when the job asked for it (sbatch --signal,
// which ddp's template does, with a fixed 2 minutes), a cloud batch service
// or a Kubernetes deadline gives the default grace of seconds. A checkpoint
// that takes longer than the warning is lost with the steps since the last
// one. Megatron-Core's --exit-duration-in-mins and Lightning's max_time stop
// at the first check past the budget and write their checkpoint after it,
// so the user subtracts a guess of the writing time. Here the budget is the
// end: rank 0 stops at the last stop check (where the ranks agree anyway,
// about every second or 10 steps) after which the run would not
// be done in time, counting
//   - the time to the next check: its steps (Note [How often the ranks
//     check for a stop] in trainer/trainer.h), and on a GPU those the host
//     has issued ahead of the device, each as long as the longest mean step
//     between two checks so far, plus the longest evaluation when one comes
//     before it (an epoch's end, --eval-every), plus the longest replica
//     check so far, which the stop's checkpoint begins with (Note
//     [Checking that the replicas agree] in trainer/replica_check.h) (the
//     Trainer's part, secondsToNextCheck);
//   - the stop's own writes: its checkpoint, as long as the longest
//     checkpoint so far took from its first byte to on disk (twice, when
//     one is still being written: the stop's waits for it), and
//     --save-model's weights, counted the same again (a checkpoint holds the
//     weights and the optimizer state, so it takes longer).
// Measured, so they follow the run: a slower file system reserves more.
// Before the first checkpoint has been written, a write timed at start-up
// stands in for it (Note [The first write's time] in
// launcher/write_probe.h). The clock is rank 0's, from ddp_train's start,
// less the time the process was stopped (Note [Time the process was
// stopped] in runtime/process_stops.h): Slurm moves a suspended job's end
// by the suspension (EndTime, checked on the test cluster), so a budget
// that counted it would stop the run that much early;
// the job's own start (the scheduler's prolog, mpirun's launch) came a
// little earlier, so a limit a few seconds under the job's is the one to
// give. Every rank stops after the same step (the stop check is a
// collective), and ddp_train exits with kExitTimeLimit: a job script can
// tell "resume me" (scontrol requeue, or the next job in a chain) from
// success and from failure.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace ddp::launcher {

// ddp_train's exit code when --time-limit stopped the run (Note [Stopping
// before a time limit]).
inline constexpr int kExitTimeLimit = 3;

// "5400s", "90m", "1.5h", "2d", or as sbatch --time writes it with colons:
// "M:SS", "H:MM:SS", "D-H", "D-H:MM", "D-H:MM:SS". A bare number is refused:
// sbatch reads one as minutes, ddp_train's other durations as seconds.
// Returns the seconds, or nullopt for anything else (zero and negative
// durations included).
std::optional<double> parseDuration(std::string_view text);

// As sbatch --time writes it, whole seconds: 5400 -> "1:30:00", 90061.5 ->
// "1-01:01:01"; under a minute with hundredths: 42.257 -> "42.26 s".
std::string durationText(double seconds);

class TimeLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // `limitSeconds` from `start` (ddp_train's); `writesCheckpoints`:
  // --checkpoint-dir; `savesModel`: --save-model, written after the stop's
  // checkpoint.
  TimeLimit(double limitSeconds, Clock::time_point start, bool writesCheckpoints, bool savesModel);

  // Rank 0's training thread, when a checkpoint starts (after the previous
  // one is on disk) and its writer thread, when it is on disk: the longest
  // such write is what the stop keeps for its own.
  void writeStarted(Clock::time_point now = Clock::now());
  void writeDone(Clock::time_point now = Clock::now());
  // Rank 0 at start-up, from a write it timed (Note [The first write's
  // time] in launcher/write_probe.h): what a checkpoint and --save-model's
  // weights are expected to take, kept until a checkpoint has been timed.
  void expectWrites(double checkpointSeconds, double modelSeconds);

  // Rank 0 at a stop check: whether stopping after the next check would end
  // the run past the limit (TrainOptions::timeUp). Records what it counted
  // for stopText().
  bool timeUp(double secondsToNextCheck, Clock::time_point now = Clock::now());

  // What rank 0 says once the stop is decided, when and what it kept time
  // for: "at 1:29:10 of 1:30:00, the steps to the next stop check could
  // take up to 31.00 s and the last writes 28.00 s".
  std::string stopText() const;
  // What it says once the last writes are done: how far from the limit the
  // run ended (past it: a warning's text, with the reason).
  std::string endText(Clock::time_point now = Clock::now()) const;
  bool endedPastLimit(Clock::time_point now = Clock::now()) const;

 private:
  double reserveSeconds() const;  // caller holds mutex_

  const double limit_;
  const Clock::time_point start_;
  const bool writesCheckpoints_;
  const bool savesModel_;
  mutable std::mutex mutex_;  // the writes are timed on two threads
  std::optional<Clock::time_point> writeStart_;
  double longestWrite_ = 0.0;                                 // 0 until a write has been timed
  std::optional<double> expectedCheckpoint_, expectedModel_;  // expectWrites
  // At the check that stopped the run, and what its writes were counted as
  // (stopText() comes once they are done, and timed).
  double stoppedAt_ = 0.0, keptForStretch_ = 0.0, keptForWrites_ = 0.0;
  enum class WritesCounted { kTimed, kExpected, kNone } writesCounted_ = WritesCounted::kNone;
};

}  // namespace ddp::launcher
