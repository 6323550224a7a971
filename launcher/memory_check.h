// Start-up check that a run's model fits the node's host memory.
//
// Note [Refusing a model the node cannot hold]
// Host memory is overcommitted: a rank's allocations succeed, and the kernel
// ends a rank with SIGKILL only when a page is first written. A model too big
// for the node therefore ran part-way (the weights were built, the Reducer's
// buckets were being zeroed) and mpirun then said only "exited on signal 9".
// The weights, the gradients, the optimizer state and a synthetic data set
// are all written in full, so their sum is a lower bound of what the run needs; each
// node's first rank compares its node's share against the memory the kernel
// will give (runtime/memory.h, availableBytes) before any rank loads data or
// builds the model. With --checkpoint-dir, rank 0's node also counts the copy
// that checkpoints are written from (allocated by the first checkpoint:
// without it counted, a run that cannot hold it passes the check, trains,
// and fails at that checkpoint), unless they are written without one (Note
// [Choosing where checkpoints are staged]). Activations beyond the layers' outputs,
// Fashion-MNIST's 55 MB and MPI's buffers come on top, so a run that passes
// may still not fit; one that fails cannot.
//
// Note [A process memory limit]
// A limit on the process itself (`ulimit -v` or `ulimit -d`, set on some
// clusters' nodes or by a batch system; runtime/memory.h,
// processMemoryLimit) can leave a rank far less than the node has free.
// There the failure was worse than a kill: OpenBLAS maps a 128 MiB work
// buffer for the first GEMM on each thread, and when that mapping fails it
// retries for ever, so every rank spun in its first forward pass and the job
// hung in silence (no rank reached a collective for the watchdog to time).
// So the same check also holds one rank's need, plus one such buffer (the
// training thread's, not mapped yet at the check), against the room the
// limit leaves above what the process maps already: MPI, the libraries (the
// CUDA build maps about 1 GiB of them), the threads' stacks and malloc's
// per-thread arenas. It is a lower bound: with more than one BLAS thread,
// the other threads map their buffers when OpenBLAS chooses, before the
// check or after it, so a limit just above the bound can still hang.
// The check needs MPI, but MPI's start-up and the rank's threads map about
// 290 MiB here (VmSize grew from 1037 to 1322 MiB between MPI_Init and the
// check), and under a limit too tight for that, PMIx crashed inside
// MPI_Init (and a process started without mpirun hung there, forking while
// OpenBLAS's threads spun). So before MPI starts, each node's first process also warns when
// the room left is below that allowance: the cause then stands above the
// crash. With more room, MPI starts and the check speaks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "launcher/options.h"
#include "runtime/cpu_share.h"
#include "runtime/memory.h"
#include "runtime/world.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/tensor.h"

namespace ddp::launcher {

// What one rank's host memory must hold at least (Note [Refusing a model the
// node cannot hold]).
struct HostMemoryNeed {
  std::size_t parameters = 0;      // of the whole model
  std::size_t weights = 0;         // bytes
  std::size_t gradients = 0;       // bytes: the Reducer's buckets (CPU runs)
  std::size_t optimizerState = 0;  // bytes: SGD's momentum, AdamW's moments (CPU runs)
  std::size_t outputs = 0;         // bytes: each layer's output for the largest batch (CPU runs)
  std::size_t data = 0;            // bytes: --dataset synthetic's features and labels
  // What every rank needs.
  std::size_t total() const { return weights + gradients + optimizerState + outputs + data; }
  // Bytes rank 0 needs on top with --checkpoint-dir, on CPUs and GPUs alike:
  // the host copy of the weights and optimizer state that checkpoints are
  // written from (Note [Checkpoints written in the background] in
  // trainer/checkpoint_writer.h). Without it counted, a run too large for
  // that copy was killed at its first checkpoint, its training lost.
  // Where checkpoints are written directly, no copy is held, not even of a
  // sharded optimizer's state (Note [Streaming a sharded optimizer's state]
  // in trainer/sharded_optimizer.h), and checkNodeMemory counts none.
  std::size_t checkpointCopy = 0;
  // With --resume, rank 0 maps the file it restores from (the same bytes as
  // the copy), before the copy exists, and releases its pages as they are
  // sent (Note [Restoring a checkpoint from one rank] in
  // trainer/checkpoint_broadcast.h): no memory of the node's, but address
  // space and data segment (a private writable mapping), which `ulimit -v`
  // and `ulimit -d` limit.
  std::size_t resumedFile = 0;
};

// On a GPU the model is built on the host, then moved: the host holds the
// weights once; the rest lives on the device. `rankZero`: the rank that
// writes checkpoints (checkpointCopy).
// `world`: the ranks that share the optimizer state (--shard-optimizer).
HostMemoryNeed hostMemoryNeed(const Options& o, trainer::Device device, bool rankZero = false,
                              int world = 1);

// The refusal for `ranks` ranks of `need` each against `available` bytes, or
// nullopt when they fit.
std::optional<std::string> memoryShortfall(const HostMemoryNeed& need, int ranks,
                                           std::size_t available, const std::string& host);

// OpenBLAS's GEMM work buffer (BUFFER_SIZE in its common_x86_64.h), which
// the first GEMM on a thread maps (Note [A process memory limit]).
inline constexpr std::size_t kBlasBufferBytes = std::size_t{128} << 20;

// The refusal when one rank's `need` (plus a BLAS buffer on CPUs) does not
// fit in the room `limit` leaves, or nullopt.
std::optional<std::string> processLimitShortfall(const HostMemoryNeed& need, trainer::Device device,
                                                 const ProcessMemoryLimit& limit,
                                                 const std::string& host);

// What MPI's start-up and a rank's threads map before the check (about 290
// MiB here), rounded up.
inline constexpr std::size_t kMpiStartBytes = std::size_t{320} << 20;

// Before MPI starts: the warning when `limit` leaves less than
// kMpiStartBytes, or nullopt.
std::optional<std::string> processLimitWarning(const ProcessMemoryLimit& limit,
                                               const std::string& host);

// Note [Choosing where checkpoints are staged]
// Rank 0's copy for checkpoints (CheckpointStaging::kCopy, Note
// [Checkpoints written in the background] in trainer/checkpoint_writer.h)
// is one more checkpoint's worth of memory on the node that already holds
// the most: 1x the weights with SGD and no momentum, 3x with AdamW. Where
// the node or the process limit had no room for it, the run was refused,
// though it could train, and checkpoint without the copy (kDirect). So
// --checkpoint-staging auto copies only when the copy fits with a tenth of
// the room to spare (the need is a lower bound: activations and MPI's
// buffers come on top, and a copy that barely fits would end the run at its
// first checkpoint), and otherwise writes directly and says so; `copy`
// insists on the copy (refused when it does not fit, pointing to `direct`),
// `direct` never makes one.
// With --shard-optimizer, auto writes directly wherever it could copy:
// the state then streams from the ranks into the file (Note [Streaming a
// sharded optimizer's state] in trainer/sharded_optimizer.h), where the
// copy needs it gathered whole first. Less work, and measured less time:
// 1.3 s per checkpoint of the large MLP with AdamW at np=2 against the
// copy's 3.4 (benchmarks/RESULTS.md, "A sharded optimizer's state streamed
// into the file"), and none of the state held on rank 0. Since the copy's
// gather reuses its buffer from one checkpoint to the next, 1.59 s against
// 2.49 ("The sharded copy's buffer kept").
// On CPUs, auto also writes directly where the copy fits but rank 0 may run
// on one CPU only (mpirun binds each rank to a core at np <= 2; srun with
// one CPU per task). The thread writing the copy out is confined to the
// training thread's CPU there and takes its time from the steps, and the
// copy is one more pass over the checkpoint's bytes, into pages faulted in
// afresh: per checkpoint of the large MLP at np=2, each rank bound to its
// core, auto's copy cost 1.34 s with SGD and 2.18 with AdamW, writing
// directly 0.91 and 1.60 (benchmarks/RESULTS.md, "`auto` where rank 0 may
// run on one CPU"). On more CPUs the scheduler runs the thread where another
// waits (the other ranks for rank 0 in a collective, BLAS threads in the
// step's serial parts), and the copy's shorter pause wins, even with as
// many ranks or threads as CPUs: 0.84-1.08 s against 1.11-1.42 at np=2
// unbound on two cores, 0.82 against 0.95 at np=1 with two BLAS threads,
// 0.31 against 0.78 with one. GPU ranks keep the copy (a device-to-host
// copy; their training thread mostly waits on the device).

// The room auto leaves free beside the copy (the Note above).
inline constexpr double kStagingSpareFraction = 0.1;

// Why rank 0 stages checkpoints as it does (the Note above).
enum class StagingReason {
  kAsked,     // --checkpoint-staging copy or direct, or no checkpoints to stage
  kSharded,   // auto with --shard-optimizer: the state streams into the file
  kCopyFits,  // auto: room for the copy, and CPUs for writing it out
  kNoRoom,    // auto: no room for the copy on the node or under the process limit
  kOneCpu,    // auto: the copy fits, but rank 0 may run on one CPU only
};

struct StagingChoice {
  trainer::CheckpointStaging staging = trainer::CheckpointStaging::kCopy;
  StagingReason reason = StagingReason::kAsked;
  std::size_t copyBytes = 0;  // the copy auto does without (kNoRoom, kOneCpu), for the notice
};

// Where rank 0 stages checkpoints, for `option` (--checkpoint-staging) and a
// `need` whose checkpointCopy is the copy's size: `available` is its node's
// room (for `ranks` ranks), `limit` its process limit's, either unknown.
// Refusing a copy that does not fit is memoryShortfall's. `sharded`:
// --shard-optimizer. `cpus`: the CPUs rank 0 may run on (CpuShare::allowed).
StagingChoice chooseStaging(const std::string& option, const HostMemoryNeed& need, int ranks,
                            std::optional<std::size_t> available,
                            const std::optional<ProcessMemoryLimit>& limit, trainer::Device device,
                            bool sharded, int cpus);

// On rank 0 (of `host`), what the start-up says when auto chose kDirect
// beside an unsharded optimizer (the copy's size and why), or nullopt.
std::optional<std::string> stagingNotice(const StagingChoice& choice, const std::string& host);

// Each node's first rank: throws Error (exit 1, not a usage error: the same
// command runs on a larger node; Note [Usage errors after start-up]) when
// the node's ranks cannot hold the run, or when its own process memory
// limit (which its siblings share: they inherit it from one launcher)
// cannot hold one rank. Call inside agree(), and let it finish before any
// rank loads data or builds the model. Returns where rank 0 stages
// checkpoints and why (chooseStaging, given its `cpus` share; kCopy on the
// other ranks, which write none).
StagingChoice checkNodeMemory(const Options& o, const World& world, trainer::Device device,
                              const CpuShare& cpus);

}  // namespace ddp::launcher
