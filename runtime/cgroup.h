// Where a process's cgroup limits live: the directories of its cgroup and
// of every cgroup above it, in both cgroup versions.
//
// Note [Reading cgroup limits]
// A limit on any cgroup above a process binds it too: a Slurm job's cgroup
// holds its steps', a Kubernetes pod's its containers'. So the readers of a
// limit (memory room in runtime/memory.h, a CPU quota in
// runtime/cpu_quota.h) walk from this process's cgroup up to the root and
// keep the tightest. /proc/self/cgroup names the cgroup: "0::/path" for
// v2's single hierarchy, whose files are under /sys/fs/cgroup, and
// "4:memory:/path" (or "3:cpu,cpuacct:/path") for a v1 controller's
// hierarchy, under /sys/fs/cgroup/<controllers>, or /sys/fs/cgroup/<one
// controller> where systemd mounts the joined name and links each part.
// Inside a container /proc/self/cgroup may name a path of the host's
// hierarchy while only the container's part is mounted: the directories
// that do not exist are skipped, and the container's own limits are at the
// mount's root, where the walk ends. The mount points are systemd's, which
// every distribution and container runtime uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

enum class CgroupVersion { kV1, kV2 };

struct CgroupDir {
  std::string path;  // ends with '/', so that a file's name can be appended
  CgroupVersion version = CgroupVersion::kV2;
};

// The directories of this process's cgroup and of each cgroup above it,
// innermost first, of the v2 hierarchy and of v1's hierarchy that holds
// `v1Controller` ("memory", "cpu"), those that exist. `root` is "" on a real
// system; tests point it at a fake tree holding proc/self/cgroup and
// sys/fs/cgroup/. Any thread.
std::vector<CgroupDir> cgroupDirs(const std::string& root, std::string_view v1Controller);

// The number after `key` on its line of a "<key> <n> [unit]" file (/proc's
// status and meminfo files, a cgroup's memory.stat and cpu.stat); nullopt
// when the file or the key is missing.
std::optional<unsigned long long> keyedNumber(const std::string& path, std::string_view key);

// The first word of the file at `path` as a non-negative integer; nullopt
// when it is "max" (v2's no limit), negative (v1's -1), not a number, or
// the file cannot be read.
std::optional<unsigned long long> cgroupNumber(const std::string& path, int word = 0);

}  // namespace ddp
