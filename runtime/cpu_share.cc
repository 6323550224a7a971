#include "runtime/cpu_share.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "runtime/cpu_quota.h"
#include "runtime/mpi_check.h"
#include "runtime/str.h"
#include "runtime/world.h"

namespace ddp {
namespace {

int onlineCpus() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(std::min<long>(online, CpuMask().size())) : 1;
}

}  // namespace

CpuMask allowedCpus() {
  CpuMask mask;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (std::size_t cpu = 0; cpu < mask.size() && cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) mask.set(cpu);
  }
  if (mask.none()) {
    for (int cpu = 0; cpu < onlineCpus(); ++cpu)
      mask.set(static_cast<std::size_t>(cpu));
  }
  return mask;
}

int sharersOf(const CpuMask& mine, std::span<const CpuMask> node) {
  return static_cast<int>(std::count_if(
      node.begin(), node.end(), [&](const CpuMask& other) { return (mine & other).any(); }));
}

int threadsForMask(const CpuMask& mine, std::span<const CpuMask> node) {
  const int cpus = static_cast<int>(mine.count());
  return std::max(1, cpus / std::max(1, sharersOf(mine, node)));
}

double expectedCpuShare(const CpuShare& share, int threads) {
  const double demand = static_cast<double>(std::max(1, share.sharers)) * std::max(1, threads);
  double expected = std::min(1.0, static_cast<double>(std::max(1, share.allowed)) / demand);
  if (share.quotaCpus > 0) {
    const double quotaDemand =
        static_cast<double>(std::max(1, share.quotaSharers)) * std::max(1, threads);
    expected = std::min(expected, share.quotaCpus / quotaDemand);
  }
  return expected;
}

std::optional<RunQueueTimes> threadRunQueueTimes() {
  std::ifstream file("/proc/thread-self/schedstat");
  double runningNs = 0, waitingNs = 0;
  if (!(file >> runningNs >> waitingNs)) return std::nullopt;
  return RunQueueTimes{runningNs * 1e-9, waitingNs * 1e-9};
}

ThreadCount chooseThreads(int requested, const CpuShare& share,
                          const std::function<const char*(const char*)>& getenv) {
  if (requested > 0) return {requested, "--threads"};
  for (const char* variable : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char* value = getenv(variable);
    if (value == nullptr) continue;
    char* end = nullptr;
    const long count = std::strtol(value, &end, 10);
    // "4,2" (OpenMP's nested form) counts its first level; 0 or junk is unset.
    if (end != value && (*end == '\0' || *end == ',') && count > 0 && count <= 4096) {
      return {static_cast<int>(count), variable};
    }
  }
  if (!share.threadsFromQuota) return {share.threads, ""};
  return {share.threads, "a CPU quota of " + describeQuota(share.quotaCpus, share.quotaSharers)};
}

CpuShare shareCpus(const World& world) {
  // Each rank's node index, its quota (in millionths of a CPU, 0: none) and
  // the quota's cgroup (hashed), then its mask as 64-bit words.
  constexpr std::size_t kHeader = 3, kWords = CpuMask().size() / 64;
  const CpuMask mine = allowedCpus();
  const std::optional<CpuQuota> quota = cpuQuota();
  std::vector<unsigned long long> entry(kHeader + kWords, 0);
  entry[0] = static_cast<unsigned long long>(world.nodeIndex());
  if (quota) {
    entry[1] = std::max(1ull, static_cast<unsigned long long>(std::llround(quota->cpus * 1e6)));
    entry[2] = std::hash<std::string>{}(quota->cgroup);
  }
  for (std::size_t cpu = 0; cpu < mine.size(); ++cpu)
    if (mine.test(cpu)) entry[kHeader + cpu / 64] |= 1ull << (cpu % 64);
  std::vector<unsigned long long> all(entry.size() * static_cast<std::size_t>(world.size()));
  DDP_MPI_CHECK(MPI_Allgather(entry.data(), static_cast<int>(entry.size()), MPI_UNSIGNED_LONG_LONG,
                              all.data(), static_cast<int>(entry.size()), MPI_UNSIGNED_LONG_LONG,
                              world.comm()));
  std::vector<CpuMask> node;
  CpuMask usable;
  int quotaSharers = 0;
  for (int r = 0; r < world.size(); ++r) {
    const unsigned long long* theirs = all.data() + static_cast<std::size_t>(r) * entry.size();
    if (theirs[0] != entry[0]) continue;
    if (quota && theirs[1] == entry[1] && theirs[2] == entry[2]) ++quotaSharers;
    CpuMask mask;
    for (std::size_t cpu = 0; cpu < mask.size(); ++cpu)
      if ((theirs[kHeader + cpu / 64] >> (cpu % 64)) & 1ull) mask.set(cpu);
    usable |= mask;
    node.push_back(mask);
  }
  CpuShare share;
  share.threads = threadsForMask(mine, node);
  share.sharers = sharersOf(mine, node);
  share.allowed = static_cast<int>(mine.count());
  share.nodeUsable = static_cast<int>(usable.count());
  share.nodeAvailable = onlineCpus();
  if (const auto cpus = naturalNumber<int>(std::getenv("SLURM_CPUS_ON_NODE")); cpus && *cpus > 0)
    share.nodeAvailable = *cpus;
  if (quota) {
    applyQuota(share, quota->cpus, quotaSharers);
    share.quotaCgroup = quota->cgroup;
  }
  return share;
}

void applyQuota(CpuShare& share, double quotaCpus, int quotaSharers) {
  share.quotaCpus = quotaCpus;
  share.quotaSharers = std::max(1, quotaSharers);
  const int quotaThreads = threadsForQuota(quotaCpus, share.quotaSharers);
  if (quotaThreads < share.threads) {
    share.threads = quotaThreads;
    share.threadsFromQuota = true;
  }
  // The CPUs' worth of time the quota lets the node's ranks under it use.
  share.nodeAvailable = std::min(share.nodeAvailable, threadsForQuota(quotaCpus, 1));
}

}  // namespace ddp
