#include "launcher/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"
#include "runtime/world.h"

namespace ddp::launcher {
namespace {

// "ddp_train (pid 4242 on node-a, Slurm job 77), since 2026-11-30 19:58:03 UTC"
std::string holderText() {
  char since[64] = {};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S UTC", &utc);
  const char* job = std::getenv("SLURM_JOB_ID");
  return str("ddp_train (pid ", ::getpid(), " on ", thisHostname(),
             job != nullptr ? str(", Slurm job ", job) : std::string(), "), since ", since);
}

std::string readAll(int fd) {
  std::string text;
  char buffer[512];
  off_t offset = 0;
  for (ssize_t n; (n = ::pread(fd, buffer, sizeof buffer, offset)) > 0; offset += n)
    text.append(buffer, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text;
}

}  // namespace

std::string CheckpointDirLock::pathIn(const std::string& dir) {
  return (std::filesystem::path(dir) / ".ddp_train.lock").string();
}

CheckpointDirLock::CheckpointDirLock(const std::string& dir) {
  const std::string path = pathIn(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  // Another user's lock file in a shared directory: flock() needs no write
  // access, so lock it all the same (the holder then goes unrecorded).
  if (fd_ < 0 && errno == EACCES) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw DataError(str(path, ": cannot open (", std::strerror(errno), ")"));
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    if (error != EWOULDBLOCK) {
      // A file system without locks (NFS mounted nolock): run, unguarded.
      log::warn(str(path, ": cannot lock (", std::strerror(error),
                    "): another run given the same --checkpoint-dir would not be noticed"));
      return;
    }
    const std::string holder = readAll(fd_);
    ::close(fd_);
    fd_ = -1;
    throw DataError(str("--checkpoint-dir ", dir, " is in use by another run: ",
                        holder.empty() ? std::string("one that has just started") : holder,
                        ". Its checkpoints and this run's would delete and resume each "
                        "other's: give each run its own directory"));
  }
  // Who holds it, for the next run's message; the lock holds even if this fails.
  const std::string text = holderText() + "\n";
  const bool recorded = ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) ==
                                                        static_cast<ssize_t>(text.size());
  static_cast<void>(recorded);
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace ddp::launcher
