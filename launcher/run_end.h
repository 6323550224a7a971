// How a training run ended, as the last line rank 0 appends to --metrics.
//
// Note [The run's last --metrics line]
// A sweep or a job script that reads --metrics wants to know how the run
// ended without re-deriving it: whether it trained every epoch, or
// --max-steps, --early-stop, --time-limit or a signal stopped it, or it
// failed; where it stopped; the checkpoint to resume from; and the best
// evaluation --save-best kept. The exit code says part of it, but is gone
// with the job's shell, as Hugging Face's all_results.json and an MLflow
// run's status are not. So a training run's last --metrics line is its end:
// `ended_by` (never a key of the other lines, so a reader tells it apart
// as it tells the others: README "Reading the output"), the exit code, the
// step, the time, and what was written. A resumed run appends to the same
// file, so each part of a run stopped and resumed ends with its own line.
// A run that fails writes it when rank 0 learns of the failure, at start-up
// too (its data, its memory, an option the data shows to be bad: the line's
// writer is set before anything else can fail, so that a resumed part that
// failed does not leave the last part's line last; a usage error found
// before the communicator exists, by the world size or the node's GPUs,
// writes it from a writer of its own): an error
// its main thread caught itself, a peer's that reached it, or any rank
// ending the job (a collective timed out there, its watchdog found a
// desync, a rank that has ended, or a rank stuck outside any collective),
// which tells rank 0 first (Note [Telling rank 0 that the job ends] in
// comm/watchdog.h). Rank 0's main thread may be stuck then, even inside a
// write of this file, so the line may come from another thread, once,
// and within a bound (Note [One end line, from any thread] in
// launcher/run_end_recorder.h). Nothing is written when the process is
// killed outright (SIGKILL, the OOM killer, a lost node) or the file's
// file system hangs. So a file whose last line is not an end line belongs
// to a run still going, or to one killed. --evaluate writes no end line:
// its one line is the whole result.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "trainer/checkpoint.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

// "epochs", "max_steps", "early_stop", "signal", "time_limit": the
// ended_by of a run whose Trainer::run() returned.
const char* endedByName(trainer::RunEnd end);

// "SIGTERM" (or "signal 64" for one without a name).
std::string signalName(int signal);

struct RunOutcome {
  std::string endedBy;  // endedByName's, or "error"
  int exitCode = 0;
  // The run's last step: trained to (an error: the last one reported; 0:
  // none, and a resumed run that trained nothing: its checkpoint's).
  std::size_t globalStep = 0;
  std::optional<std::size_t> plannedSteps;  // Trainer::plannedSteps, once known
  double wallSeconds = 0.0;                 // since ddp_train started
  // Of wallSeconds, the time rank 0's process was not run (Note [Time the
  // process was stopped] in runtime/process_stops.h): a suspended job.
  double suspendedSeconds = 0.0;
  int signal = 0;     // endedBy "signal"
  std::string error;  // endedBy "error": what rank 0 logged
  // --checkpoint-dir: the newest checkpoint this run wrote (null in JSON:
  // none). Without it, no key.
  std::optional<std::string> checkpoint;
  std::optional<std::string> savedModel;  // --save-model's file, once written
  // --save-best or --early-stop: the run's best evaluation (step 0: none
  // yet), and --save-best's file.
  std::optional<trainer::BestRecord> best;
  std::optional<std::string> bestFile;
};

// The JSON line (no newline) for `outcome`: ended_by, exit_code,
// last_step, run_time_s (keys of no other line); suspended_s when the run
// was suspended; planned_steps once known; signal (its name) for a signal;
// error for an error; checkpoint (null: none written) with
// --checkpoint-dir; model once --save-model wrote it; best_metric,
// best_step, best_test_loss, best_test_accuracy with --save-best or
// --early-stop, and best_file with --save-best (each null while there is no
// best).
std::string runEndMetrics(const RunOutcome& outcome);

}  // namespace ddp::launcher
