// A graceful stop on SIGTERM or SIGINT (Slurm preemption, scancel, Ctrl-C).
//
// The handler only records the signal; the training loop polls stopSignal()
// between steps, the ranks agree (every rank must stop after the same step,
// or the next collective would hang), and the job writes a checkpoint and
// exits with 128 + the signal. The first signal of each kind restores the
// default action, so a second Ctrl-C ends the process at once.
#pragma once

namespace ddp {

// Installs the handlers (process-wide, once; main thread).
void installStopHandlers();

// The stop signal received so far, or 0. Async-signal-safe to set, any thread may read.
int stopSignal();

}  // namespace ddp
