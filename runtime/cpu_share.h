// CpuShare: how many compute threads (BLAS, batch gathering) each rank runs.
//
// Note [Threads per rank]
// Launchers decide which CPUs a rank may run on, and
// std::thread::hardware_concurrency() sees none of it: Open MPI 4's mpirun
// binds each rank to one core when np <= 2 and to a socket above that,
// srun to what --cpus-per-task and --cpu-bind give, and taskset, cpusets and
// containers narrow the set further. Dividing the node's CPUs by its ranks
// gave `mpirun -np 1` on this 2-core machine 2 BLAS threads on its one
// allowed core, and would give a rank bound to one core of a 64-core node
// 32. So each rank reads its affinity mask, the ranks of a node exchange
// theirs, and a rank's threads are the CPUs of its mask divided by the ranks
// of the node whose masks overlap it (itself included), at least 1:
//   - bound to its own core: 1;
//   - four ranks bound to the same 32-core socket: 8 each;
//   - not bound: the node's CPUs divided by its ranks.
// A CPU quota on the ranks' cgroup (Note [CPU quotas] in
// runtime/cpu_quota.h) caps that: the ranks of the node under the same quota
// divide it, so `docker run --cpus 4` with 2 ranks gives each 2 threads
// whatever the masks say.
// CPUs that no rank of the node may use are reported (idleCpus), since a
// launcher's default binding is the usual reason a node computes on fewer
// cores than it has. A count the user gave wins over the share: --threads,
// else OMP_NUM_THREADS or OPENBLAS_NUM_THREADS, which PyTorch and OpenBLAS
// honour and torchrun sets to 1 (chooseThreads).
#pragma once

#include <bitset>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace ddp {

class World;

// A set of CPU numbers, as sched_getaffinity reports them (CPU_SETSIZE).
using CpuMask = std::bitset<1024>;

// The CPUs this process may run on (its affinity mask); every online CPU
// when the mask cannot be read. Any thread.
CpuMask allowedCpus();

// The threads for a rank whose mask is `mine`, on a node whose ranks
// (itself included) have the masks `node` (Note [Threads per rank]).
int threadsForMask(const CpuMask& mine, std::span<const CpuMask> node);

// The ranks among `node` (this rank's included) whose masks overlap `mine`.
int sharersOf(const CpuMask& mine, std::span<const CpuMask> node);

struct CpuShare {
  int threads = 1;                // compute threads for this rank
  int allowed = 1;                // CPUs in this rank's mask
  int sharers = 1;                // this node's ranks whose masks overlap it, itself included
  int nodeUsable = 1;             // CPUs in the union of the masks of this node's ranks
  int nodeAvailable = 1;          // CPUs the node has for this job (SLURM_CPUS_ON_NODE, else
                                  // online; at most a CPU quota, rounded)
  double quotaCpus = 0.0;         // the CPU quota on this rank's cgroup, in CPUs (0: none)
  std::string quotaCgroup;        // the cgroup directory that sets it (CpuQuota::cgroup)
  int quotaSharers = 1;           // this node's ranks under that same quota, itself included
  bool threadsFromQuota = false;  // the quota, not the mask, set `threads`
  int idleCpus() const { return nodeAvailable > nodeUsable ? nodeAvailable - nodeUsable : 0; }
};

// Caps `share` by a CPU quota of `quotaCpus` CPUs over the `quotaSharers`
// ranks of the node under it (Note [CPU quotas] in runtime/cpu_quota.h):
// its threads, and the CPUs the node has for the job. Part of shareCpus.
void applyQuota(CpuShare& share, double quotaCpus, int quotaSharers);

// The compute threads a rank runs, and who chose them.
struct ThreadCount {
  int threads = 1;
  // "--threads", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "a CPU quota of
  // 1.5 CPUs over 1 rank", or "" (the share of the CPUs the rank may run on)
  std::string source;
};

// `requested` (--threads) if positive; else OMP_NUM_THREADS, then
// OPENBLAS_NUM_THREADS, when `getenv` gives a positive count; else the
// share's (Note [Threads per rank]), naming the quota when it set them.
ThreadCount chooseThreads(int requested, const CpuShare& share,
                          const std::function<const char*(const char*)>& getenv);

// The fraction of a CPU the training thread of a rank can expect when each
// of the `sharers` ranks on its `allowed` CPUs runs `threads` compute
// threads: 1, unless its own job puts more threads than CPUs there (four
// ranks bound to two cores: 0.5), or than its CPU quota lets run. Less than this, measured, means
// other processes compete for the CPUs (Note [Finding a contended CPU] in launcher/progress.h).
double expectedCpuShare(const CpuShare& share, int threads);

// The time the calling thread has spent on a CPU and waiting on a run queue
// for one (ready to run, but the CPU busy with another thread), in seconds,
// from /proc/thread-self/schedstat; nullopt where the kernel keeps no such
// figures. A thread that sleeps or blocks adds to neither.
struct RunQueueTimes {
  double running = 0.0;
  double waiting = 0.0;
};
std::optional<RunQueueTimes> threadRunQueueTimes();

// This rank's share of its node's CPUs. Collective over the world (one
// all-gather of the masks); called once at start-up, on the main thread.
CpuShare shareCpus(const World& world);

}  // namespace ddp
