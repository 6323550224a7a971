#include "launcher/launcher_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "runtime/cpu_quota.h"
#include "runtime/str.h"

namespace ddp::launcher {

Keepalive keepaliveFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  Keepalive k;
  const auto read = [&](const char* name, int& into) {
    // Junk leaves Open MPI's default, as an unset variable does.
    if (const auto value = naturalNumber<int>(getenv(name))) into = *value;
  };
  read("OMPI_MCA_oob_tcp_keepalive_time", k.time);
  read("OMPI_MCA_oob_tcp_keepalive_intvl", k.interval);
  read("OMPI_MCA_oob_tcp_keepalive_probes", k.probes);
  return k;
}

Keepalive suggestedKeepalive(double timeoutSeconds, double stallWarningSeconds) {
  Keepalive k;
  k.probes = 5;
  // The probes outlast the stall warning (and its 2 s of asking peers) ...
  k.interval = std::max(1, static_cast<int>(std::ceil((stallWarningSeconds + 5) / k.probes)));
  // ... unless that leaves too little of a short timeout: then the timeout wins.
  if (k.interval * k.probes > timeoutSeconds * 0.6) {
    k.interval = 1;
    k.probes = std::clamp(static_cast<int>(std::floor(timeoutSeconds * 0.4)), 1, 5);
  }
  // The whole keepalive ends well before the timeout.
  k.time =
      std::max(1, static_cast<int>(std::floor((timeoutSeconds - k.interval * k.probes) * 0.8)));
  return k;
}

std::optional<std::string> keepaliveWarning(const Keepalive& keepalive, double timeoutSeconds,
                                            double stallWarningSeconds) {
  if (keepalive.time > 0 && keepalive.worstCase() < timeoutSeconds) return std::nullopt;
  const double stall = std::min(stallWarningSeconds, timeoutSeconds / 2);
  const Keepalive s = suggestedKeepalive(timeoutSeconds, stall);
  const std::string now =
      keepalive.time <= 0 ? std::string("has its TCP keepalive off (oob_tcp_keepalive_time <= 0)")
                          : str("finds a lost node only after up to ", keepalive.worstCase(),
                                " s (oob_tcp_keepalive_time ", keepalive.time, " + ",
                                keepalive.probes, " probes x ", keepalive.interval,
                                " s), not before --timeout ", timeoutSeconds, " s");
  return str("mpirun across nodes ", now,
             ": if a node's link is cut, ddp reports it and aborts, but mpirun then waits "
             "for TCP to give up (up to ~15 minutes). Launch with --mca oob_tcp_keepalive_time ",
             s.time, " --mca oob_tcp_keepalive_intvl ", s.interval,
             " --mca oob_tcp_keepalive_probes ", s.probes, " (README, \"Across nodes\")");
}

std::optional<std::string> idleCpuWarning(const CpuShare& share, int threads, int localRanks,
                                          Launcher launcher) {
  if (share.idleCpus() == 0) return std::nullopt;
  const int each = std::max(1, share.nodeAvailable / std::max(1, localRanks));
  std::string fix;
  switch (launcher) {
    case Launcher::kMpirun:
      fix =
          str("Open MPI binds each rank to one core when np <= 2 and to a socket above that; "
              "`mpirun --bind-to none` (or --map-by slot:PE=",
              each, ") gives each rank ", each);
      break;
    case Launcher::kSrun:
      fix = str("`srun --cpus-per-task ", each, "` gives each rank ", each);
      break;
    case Launcher::kSingleton:
      fix = str("its CPU affinity, set by taskset or a cgroup, allows ", share.allowed);
      break;
  }
  const bool byQuota =
      share.quotaCpus > 0 && share.nodeAvailable == threadsForQuota(share.quotaCpus, 1);
  return str(localRanks, localRanks == 1 ? " rank" : " ranks", " on this node may run on ",
             share.nodeUsable, byQuota ? " of the " : " of its ", share.nodeAvailable,
             byQuota ? " CPUs its CPU quota allows" : " CPUs", ": ", share.idleCpus(),
             share.idleCpus() == 1 ? " stays" : " stay", " idle, and each rank runs ", threads,
             " compute thread", threads == 1 ? "" : "s", " (", fix, ")");
}

std::optional<std::string> threadsWarning(int threads, const CpuShare& share) {
  const int quotaThreads = share.quotaCpus > 0
                               ? threadsForQuota(share.quotaCpus, share.quotaSharers)
                               : std::numeric_limits<int>::max();
  // The tighter of the two bounds is the one named: the quota's here, the mask's below.
  if (threads > quotaThreads && quotaThreads <= share.allowed) {
    return str("--threads ", threads, ", but this rank's share of its cgroup's CPU quota (",
               describeQuota(share.quotaCpus, share.quotaSharers), ") is ", quotaThreads,
               quotaThreads == 1 ? " CPU" : " CPUs",
               ": the kernel stops its threads for the rest of each period once they have used "
               "it (measured: RESULTS.md, \"A container's CPU quota\"); lower --threads or "
               "raise the quota");
  }
  if (threads <= share.allowed) return std::nullopt;
  const char* cpus = share.allowed == 1 ? " CPU" : " CPUs";
  return str("--threads ", threads, ", but this rank may run on ", share.allowed, cpus,
             ": its threads take turns there, usually slower than ", share.allowed,
             " (measured for BLAS: RESULTS.md, ddp_bench); lower --threads or bind the rank to "
             "more CPUs");
}

std::optional<std::string> srunWithoutPmiError(
    const std::function<const char*(const char*)>& getenv) {
  const bool srunTask = getenv("SLURM_STEP_ID") != nullptr && getenv("SLURM_PROCID") != nullptr;
  if (!srunTask) return std::nullopt;
  for (const char* joined : {"PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (getenv(joined) != nullptr) return std::nullopt;
  }
  const char* tasks = getenv("SLURM_STEP_NUM_TASKS");
  const std::string started = tasks == nullptr            ? std::string("this task")
                              : std::string(tasks) == "1" ? std::string("1 task")
                                                          : str(tasks, " tasks");
  return str("srun started ", started,
             " without a process-management interface (srun --mpi=none, or plain srun where "
             "slurm.conf says MpiDefault=none), so MPI cannot join them into one job: launch "
             "with `srun --mpi=pmix` (`srun --mpi=list` shows what this Slurm offers)");
}

}  // namespace ddp::launcher
