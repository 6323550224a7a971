// Host memory: what this process uses and what the node has left, from /proc
// and the cgroup file system (Linux), and zeroed allocations that fail with a
// message a user can act on.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

// Peak resident set size (VmHWM) in bytes; 0 where /proc is not available.
// Shared-memory pages this process touched count in full.
std::size_t peakResidentBytes();

// Proportional set size now (Pss in /proc/self/smaps_rollup) in bytes: pages
// shared by k processes count 1/k, so the ranks' values add up to the node's
// real use. 0 where not available.
std::size_t proportionalBytes();

// What more this process could use before the kernel's OOM killer ends it:
// MemAvailable plus SwapFree from /proc/meminfo, or less where a cgroup
// memory limit on this process (or a cgroup above it: a Slurm job's --mem, a
// container's limit) leaves less room above its working set (use minus
// inactive file cache). nullopt where /proc/meminfo cannot be
// read. `root` is "" on a real system; tests point it at a fake tree holding
// proc/ and sys/fs/cgroup/.
std::optional<std::size_t> availableBytes(const std::string& root = "");

// A cap this process's own resource limits put on its memory (setrlimit,
// inherited from the shell, mpirun or the batch system): `ulimit -v` caps
// the address space (everything mapped: libraries, thread stacks, malloc's
// reservations), `ulimit -d` the private writable data. Either can be far
// below what the node has free.
struct ProcessMemoryLimit {
  std::string name;       // how a user sets it: "ulimit -v" or "ulimit -d"
  std::string what;       // "address space" or "data segment"
  std::size_t limit = 0;  // bytes (the soft limit, the one the kernel enforces)
  std::size_t used = 0;   // bytes counted against it now (VmSize or VmData)
  std::size_t room() const { return limit > used ? limit - used : 0; }
  // "ulimit -v limits this process's address space to 976.6 MiB, and 2.8 MiB
  // of it is left", for the messages of what it stopped.
  std::string describe() const;
};

// Of the limits above that are set, the one with the least room left, from
// proc/self/limits and proc/self/status under `root` (as availableBytes);
// nullopt when neither is set or /proc cannot be read.
std::optional<ProcessMemoryLimit> processMemoryLimit(const std::string& root = "");

// `bytes` of zeroed host memory aligned to `alignment`, freed when the last
// owner goes. Throws OutOfMemoryError naming the size and what is available
// (the node's room, or a process limit's when that is less). Zeroing a
// buffer over 64 MiB faults in every page (seconds for GiBs on a VM), so it
// sends heartbeats as it goes (Note [Heartbeats of local work]). Any
// thread.
std::shared_ptr<void> allocateZeroedHost(std::size_t bytes, std::size_t alignment = 64);

}  // namespace ddp
