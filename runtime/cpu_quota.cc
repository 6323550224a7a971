#include "runtime/cpu_quota.h"

#include <algorithm>
#include <cmath>

#include "runtime/cgroup.h"
#include "runtime/str.h"

namespace ddp {

std::optional<CpuQuota> cpuQuota(const std::string& root) {
  std::optional<CpuQuota> tightest;
  for (const CgroupDir& dir : cgroupDirs(root, "cpu")) {
    const bool v2 = dir.version == CgroupVersion::kV2;
    // v2: "<quota|max> <period>" in one file; v1: -1 for no quota.
    const auto quota =
        v2 ? cgroupNumber(dir.path + "cpu.max", 0) : cgroupNumber(dir.path + "cpu.cfs_quota_us");
    const auto period =
        v2 ? cgroupNumber(dir.path + "cpu.max", 1) : cgroupNumber(dir.path + "cpu.cfs_period_us");
    if (!quota || !period || *quota == 0 || *period == 0) continue;
    const double cpus = static_cast<double>(*quota) / static_cast<double>(*period);
    if (!tightest || cpus < tightest->cpus) tightest = CpuQuota{cpus, dir.path};
  }
  return tightest;
}

int threadsForQuota(double cpus, int sharers) {
  const double each = std::round(cpus / std::max(1, sharers));
  return static_cast<int>(std::clamp(each, 1.0, 4096.0));
}

std::optional<ThrottleCounts> throttleCounts(const std::string& cgroupDir) {
  const auto periods = keyedNumber(cgroupDir + "cpu.stat", "nr_periods");
  const auto throttled = keyedNumber(cgroupDir + "cpu.stat", "nr_throttled");
  if (!periods || !throttled) return std::nullopt;
  return ThrottleCounts{*periods, *throttled};
}

std::optional<double> throttledFraction(const ThrottleCounts& before, const ThrottleCounts& after) {
  if (after.periods <= before.periods || after.throttled < before.throttled) return std::nullopt;
  return std::min(1.0, static_cast<double>(after.throttled - before.throttled) /
                           static_cast<double>(after.periods - before.periods));
}

std::string describeQuota(double cpus, int sharers) {
  const double shown = std::round(cpus * 100) / 100;
  return str(shown, shown == 1 ? " CPU" : " CPUs", " over ", sharers,
             sharers == 1 ? " rank" : " ranks");
}

}  // namespace ddp
