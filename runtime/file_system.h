// The room left on a file system, for the checks that name it before (or
// when) a write runs out of it: checkpoints (launcher/disk_check.h), files
// being written (trainer/safetensors.cc), shared memory in /dev/shm.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddp {

// Bytes this process may still write on the file system holding `path` (or
// open as `fd`): the blocks available to users, and for root the reserved
// ones too; nullopt when it cannot be read.
std::optional<std::uint64_t> freeBytesAt(const std::string& path);
std::optional<std::uint64_t> freeBytesOf(int fd);

}  // namespace ddp
