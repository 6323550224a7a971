// Start-up checks of the launcher's own settings that decide how a failure
// ends, printed as warnings on rank 0 before the first step.
//
// Note [Lost nodes under mpirun]
// When a node's link is cut, ddp's watchdog names the ranks and host that
// stopped answering (--stall-warning) and, at --timeout, aborts. Ending the
// job is then mpirun's work, and mpirun notices a lost node only through
// the TCP keepalive of its own daemons' connections (oob_tcp_keepalive_*,
// Open MPI's default: 300 s idle, then 9 probes 20 s apart: up to 480 s).
// Worse, once ddp has aborted, mpirun has sent the lost daemon its kill
// order; with that data unacknowledged TCP stops sending keepalives and
// retransmits instead, for tcp_retries2 (about 15 minutes). So the keepalive
// must find the lost node before --timeout does: time + probes x interval
// below --timeout, and probes x interval above --stall-warning, so that the
// watchdog's report comes first. Measured on the two-node test harness
// (tests/e2e/network_faults.sh): with it, mpirun ends the job seconds after
// the keepalive's last probe; without it, mpirun was still waiting after
// 110 s.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "runtime/cpu_share.h"
#include "runtime/world.h"

namespace ddp::launcher {

// Open MPI's daemon keepalive, in seconds.
struct Keepalive {
  int time = 300;     // idle time before the first probe (<= 0: keepalive off)
  int interval = 20;  // between probes
  int probes = 9;     // unanswered probes before the connection is dead
  int worstCase() const { return time + interval * probes; }
};

// The keepalive mpirun runs with, as the ranks' environment shows it
// (OMPI_MCA_oob_tcp_keepalive_*: set by --mca on the mpirun line or exported
// before it); Open MPI's defaults for what is not set.
Keepalive keepaliveFromEnvironment(const std::function<const char*(const char*)>& getenv);

// A keepalive that finds a lost node after the stall warning and before the
// timeout (Note [Lost nodes under mpirun]).
Keepalive suggestedKeepalive(double timeoutSeconds, double stallWarningSeconds);

// The warning for a multi-node mpirun job whose keepalive would find a lost
// node only after --timeout; nothing when it is fine.
std::optional<std::string> keepaliveWarning(const Keepalive& keepalive, double timeoutSeconds,
                                            double stallWarningSeconds);

// The warning for a node whose ranks may not use all the CPUs it has for
// the job (Note [Threads per rank] in runtime/cpu_share.h), with the launch
// option that would give each of its `localRanks` ranks its share; nothing
// when no CPU is idle. `threads`: what each rank runs (the share, or --threads).
std::optional<std::string> idleCpuWarning(const CpuShare& share, int threads, int localRanks,
                                          Launcher launcher);

// The warning for --threads above the CPUs this rank may run on (its
// threads would take turns on them), or above its share of a CPU quota
// (Note [CPU quotas] in runtime/cpu_quota.h); nothing otherwise.
std::optional<std::string> threadsWarning(int threads, const CpuShare& share);

// The error for a task that srun started without a process-management
// interface (`srun --mpi=none`, which is what plain `srun` does under
// Slurm's default MpiDefault=none): MPI cannot join such tasks into one job,
// and Open MPI's MPI_Init then aborts each with twenty lines about how it
// was built. Checked before MPI starts; nothing when the task can join (any
// PMI or PMIx in its environment, or mpirun's).
std::optional<std::string> srunWithoutPmiError(
    const std::function<const char*(const char*)>& getenv);

}  // namespace ddp::launcher
