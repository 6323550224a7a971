#include "runtime/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/cgroup.h"
#include "runtime/error.h"
#include "runtime/heartbeat.h"

namespace ddp {

namespace {

// The value of the "<key> <n> kB" line of a /proc file, in bytes.
std::optional<std::size_t> procKilobytes(const std::string& path, const std::string& key) {
  const auto kib = keyedNumber(path, key);
  return kib ? std::optional<std::size_t>(*kib * 1024) : std::nullopt;
}

// The least room any memory limit on this process's cgroup or the cgroups
// above it leaves (Note [Reading cgroup limits]): the limit minus the
// working set, which is the use minus the inactive file cache the kernel
// reclaims first (as the kubelet counts it; the use alone counts every
// cached page of files read, and a job that read its data would look full).
// v2: memory.max, memory.current, inactive_file; v1: memory.limit_in_bytes,
// memory.usage_in_bytes, total_inactive_file (no limit reads as a huge
// number, which loses to MemAvailable).
std::optional<std::size_t> cgroupRoom(const std::string& root) {
  std::optional<std::size_t> room;
  for (const CgroupDir& dir : cgroupDirs(root, "memory")) {
    const bool v2 = dir.version == CgroupVersion::kV2;
    const auto limit = cgroupNumber(dir.path + (v2 ? "memory.max" : "memory.limit_in_bytes"));
    if (!limit) continue;
    const std::size_t used =
        cgroupNumber(dir.path + (v2 ? "memory.current" : "memory.usage_in_bytes")).value_or(0);
    const std::size_t inactive =
        keyedNumber(dir.path + "memory.stat", v2 ? "inactive_file" : "total_inactive_file")
            .value_or(0);
    const std::size_t workingSet = used > inactive ? used - inactive : 0;
    const std::size_t left = *limit > workingSet ? *limit - workingSet : 0;
    room = std::min(room.value_or(left), left);
  }
  return room;
}

// The soft limit on the line of proc/self/limits that starts with `label`
// ("Max address space  <soft> <hard> bytes"); nullopt for "unlimited".
std::optional<std::size_t> softLimit(const std::string& path, const std::string& label) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.compare(0, label.size(), label) != 0) continue;
    std::istringstream fields(line.substr(label.size()));
    std::size_t value = 0;
    if (fields >> value) return value;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::size_t peakResidentBytes() {
  return procKilobytes("/proc/self/status", "VmHWM:").value_or(0);
}

std::size_t proportionalBytes() {
  return procKilobytes("/proc/self/smaps_rollup", "Pss:").value_or(0);
}

std::optional<std::size_t> availableBytes(const std::string& root) {
  const auto available = procKilobytes(root + "/proc/meminfo", "MemAvailable:");
  if (!available) return std::nullopt;
  const std::size_t node =
      *available + procKilobytes(root + "/proc/meminfo", "SwapFree:").value_or(0);
  const auto room = cgroupRoom(root);
  return room ? std::min(node, *room) : node;
}

std::optional<ProcessMemoryLimit> processMemoryLimit(const std::string& root) {
  const std::string limits = root + "/proc/self/limits", status = root + "/proc/self/status";
  std::optional<ProcessMemoryLimit> tightest;
  const auto consider = [&](const char* label, const char* name, const char* what,
                            const char* usedKey) {
    const auto limit = softLimit(limits, label);
    const auto used = procKilobytes(status, usedKey);
    if (!limit || !used) return;
    const ProcessMemoryLimit candidate{name, what, *limit, *used};
    if (!tightest || candidate.room() < tightest->room()) tightest = candidate;
  };
  consider("Max address space", "ulimit -v", "address space", "VmSize:");
  consider("Max data size", "ulimit -d", "data segment", "VmData:");
  return tightest;
}

std::string ProcessMemoryLimit::describe() const {
  return str(name, " limits this process's ", what, " to ", bytesString(static_cast<double>(limit)),
             ", and ", bytesString(static_cast<double>(room())), " of it is left");
}

std::shared_ptr<void> allocateZeroedHost(std::size_t bytes, std::size_t alignment) {
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  void* memory = rounded >= bytes ? std::aligned_alloc(alignment, rounded) : nullptr;
  if (memory == nullptr) {
    const auto available = availableBytes();
    const auto limit = processMemoryLimit();
    std::string why;
    if (limit && (!available || limit->room() < *available)) {
      why = str(" (", limit->describe(), ")");
    } else if (available) {
      why = str(" (", bytesString(static_cast<double>(*available)), " available to this process)");
    }
    throw OutOfMemoryError(
        str("cannot allocate ", bytesString(static_cast<double>(bytes)), " of host memory", why));
  }
  // A large buffer in steps, each followed by a heartbeat: a moving load is
  // not a hang. A small one sends none: heartbeats stand for long work.
  constexpr std::size_t kZeroStep = std::size_t{64} << 20;
  for (std::size_t at = 0; at < rounded; at += kZeroStep) {
    std::memset(static_cast<char*>(memory) + at, 0, std::min(kZeroStep, rounded - at));
    if (rounded > kZeroStep) heartbeat();
  }
  return std::shared_ptr<void>(memory, std::free);
}

}  // namespace ddp
