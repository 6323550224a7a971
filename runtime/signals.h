// A graceful stop on SIGTERM, SIGINT, SIGUSR1 or SIGHUP (Slurm preemption,
// scancel, Ctrl-C, `kill -USR1` to mpirun, a closed terminal).
//
// The handler only records the signal; the training loop polls stopSignal()
// between steps, the ranks agree (every rank must stop after the same step,
// or the next collective would hang), and the job writes a checkpoint and
// exits with 128 + the signal. The first signal of each kind restores the
// default action, so a second Ctrl-C ends the process at once.
//
// Note [Stopping under mpirun]
// Ctrl-C on mpirun does not reach the ranks: Open MPI gives each rank a
// process group of its own, and mpirun answers SIGINT or SIGTERM by sending
// the ranks SIGTERM after odls_base_sigkill_timeout (1 s) and SIGKILL as long
// again after that, while it stops reading their output. A stop fits in that
// window only when steps and the checkpoint are short. What a rank prints
// meanwhile beyond what its pty holds (19.8 KB on Linux 6.18) waits in
// memory, not the rank (Note [Output that is not read]): a run printing
// 23 KB/s blocked in its log's write until then, and was killed without its
// stop. Its stop line may so never be shown; the --metrics end line, a file,
// records the stop. SIGUSR1, though,
// mpirun forwards to every rank at once and otherwise leaves the job alone
// (ess_base_forward_signals), so `kill -USR1 <mpirun>` stops a job under
// mpirun with no time limit. It is also the signal Slurm users commonly
// request before the time limit (`--signal=USR1@120`, as PyTorch Lightning
// expects); its default action would end the rank without a checkpoint.
//
// Note [A closed terminal]
// ddp_train started in a terminal (one process, or a rank whose launcher
// left it in the terminal's process group) gets SIGHUP when the terminal
// closes or its ssh connection drops, and the default action ends it
// without a checkpoint. So SIGHUP stops it as SIGTERM does, as torchrun
// treats it (exit 129). Where SIGHUP is ignored when ddp_train starts
// (`nohup ddp_train ...`, or a parent that asked for it), it stays
// ignored: the run goes on, as the user asked. Under mpirun and srun the
// ranks do not get it: mpirun answers its own SIGHUP as SIGTERM (Note
// [Stopping under mpirun]), and srun cancels the step.
#pragma once

namespace ddp {

// Installs the handlers (process-wide, once; main thread).
void installStopHandlers();

// Note [Broken pipes]
// A write to a socket whose peer has gone raises SIGPIPE, and its default
// action ends the process at once, silently. When one rank of a job is
// killed, a rank still writing to it over TCP (Open MPI's TCP transport
// between nodes) can die that way: once in the tests, mpirun then named that
// rank, "rank 1 on node a exited on signal 13 (Broken pipe)", as the one that
// failed, instead of the rank killed on node b. The handler keeps a
// socket's broken pipe from ending the process: the write fails with EPIPE,
// which the library that made it reports (Open MPI, as a lost peer), as
// Python, and so PyTorch's ranks, do by ignoring SIGPIPE. A pipe of stdout or
// stderr whose reader is gone (`ddp_train | head`) still ends the process
// with SIGPIPE, as it would any Unix tool: the handler asks poll() whether
// one of those is broken, and if so restores the default action and raises
// the signal again.

// Installs that handler (process-wide, once; main thread, before MPI_Init
// opens sockets).
void installBrokenPipeHandler();

// The stop signal received so far, or 0. Async-signal-safe to set, any thread may read.
int stopSignal();

}  // namespace ddp
