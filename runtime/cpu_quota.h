// A CPU bandwidth limit (a quota) on this process's cgroup: how many CPUs'
// worth of time its processes may use together, whatever CPUs they may run
// on.
//
// Note [CPU quotas]
// A container's CPU limit (docker --cpus, a Kubernetes pod's
// resources.limits.cpu) is a quota: the kernel lets the cgroup's threads
// run for `quota` microseconds of CPU time in every `period` (v2 cpu.max
// "150000 100000", v1 cpu.cfs_quota_us and cpu.cfs_period_us), then stops
// them all until the period ends. It leaves the affinity mask alone, so a
// container limited to 2 CPUs on a 64-core node sees 64 CPUs, and a rank
// sizing its threads by its mask would run 64 BLAS threads on 2 CPUs' worth
// of time: each period they burn the quota in a fraction of it and then all
// wait, the threads of a matrix product waiting for each other besides.
// nproc and Python's os.cpu_count() read the mask alone (in a cgroup
// limited to 1 CPU on a 2-CPU machine both say 2); Go (since 1.25) and the
// JVM read the quota, Go only its own cgroup's. ddp reads the tightest on
// its cgroup and those above it, and a rank's threads are at most its share
// of the quota among the node's ranks under it (Note [Threads per rank] in
// runtime/cpu_share.h). Measured in RESULTS.md, "A container's CPU quota".
#pragma once

#include <optional>
#include <string>

namespace ddp {

struct CpuQuota {
  double cpus = 0.0;   // quota / period: 1.5 lets the cgroup use one and a half CPUs
  std::string cgroup;  // the directory whose limit it is, the tightest on the walk
};

// The tightest CPU quota on this process's cgroup or any cgroup above it
// (Note [Reading cgroup limits] in runtime/cgroup.h); nullopt when none is
// set. `root` as cgroupDirs's. Any thread.
std::optional<CpuQuota> cpuQuota(const std::string& root = "");

// The compute threads a quota of `cpus` leaves each of the `sharers` ranks
// under it: its share rounded to the nearest whole CPU, halves up, at
// least 1. Measured with one rank on 2 CPUs (RESULTS.md, "A container's
// CPU quota"): 2 BLAS threads took 1.59x as long a step as 1 under a quota
// of 1 CPU and 1.21x under 1.25, but 0.95x under 1.5 and 0.84x under 1.75.
int threadsForQuota(double cpus, int sharers);

// How often a cgroup's quota has stopped its threads since the cgroup was
// made: the periods in which they ran (cpu.stat's nr_periods) and those in
// which the quota ran out before the period did (nr_throttled). Both
// versions. nullopt where `cgroupDir` (CpuQuota::cgroup) has no cpu.stat.
// Any thread.
struct ThrottleCounts {
  unsigned long long periods = 0;
  unsigned long long throttled = 0;
};
std::optional<ThrottleCounts> throttleCounts(const std::string& cgroupDir);

// The fraction of the periods from `before` to `after` in which the quota
// ran out; nullopt when no period passed.
std::optional<double> throttledFraction(const ThrottleCounts& before, const ThrottleCounts& after);

// "1.5 CPUs over 2 ranks", for messages: the quota to two decimals.
std::string describeQuota(double cpus, int sharers);

}  // namespace ddp
