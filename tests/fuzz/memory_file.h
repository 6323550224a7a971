// The input of a fuzz target that reads files by path, as a file: one
// in-memory file (memfd) per target, rewritten with each input and named
// through /proc/self/fd, so that fuzzing writes nothing to disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ddp::fuzz {

// The path of a file that now holds exactly `data`; aborts if it cannot.
inline std::string asMemoryFile(const std::uint8_t* data, std::size_t size) {
  static const int kFd = memfd_create("fuzz_input", 0);
  if (kFd < 0 || ftruncate(kFd, 0) != 0 ||
      pwrite(kFd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  return "/proc/self/fd/" + std::to_string(kFd);
}

}  // namespace ddp::fuzz
