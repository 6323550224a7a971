#include "runtime/file_system.h"

#include <sys/statvfs.h>
#include <unistd.h>

namespace ddp {
namespace {

std::uint64_t roomIn(const struct statvfs& fs) {
  const std::uint64_t blocks = ::geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
  return blocks * fs.f_frsize;
}

}  // namespace

std::optional<std::uint64_t> freeBytesAt(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return std::nullopt;
  return roomIn(fs);
}

std::optional<std::uint64_t> freeBytesOf(int fd) {
  struct statvfs fs {};
  if (::fstatvfs(fd, &fs) != 0) return std::nullopt;
  return roomIn(fs);
}

}  // namespace ddp
