#include "launcher/write_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "runtime/heartbeat.h"
#include "runtime/str.h"

namespace ddp::launcher {
namespace {

// Pseudo-random bytes (xorshift64): incompressible, cheap to make.
std::vector<std::uint64_t> noise(std::size_t words) {
  std::vector<std::uint64_t> data(words);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::uint64_t& word : data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    word = x;
  }
  return data;
}

}  // namespace

double WriteTime::secondsFor(std::uint64_t n) const {
  if (bytes == 0) return 0.0;
  return seconds * std::max(1.0, static_cast<double>(n) / static_cast<double>(bytes));
}

std::optional<WriteTime> timeWrite(const std::string& dir, std::uint64_t bytes,
                                   std::string* whyNot) {
  const std::uint64_t total = std::min(bytes, kWriteProbeBytes);
  if (total == 0) return std::nullopt;
  const std::string path =
      (std::filesystem::path(dir) / str(".ddp_train-write-probe-", ::getpid())).string();
  const auto failed = [&](const char* what, int fd) -> std::optional<WriteTime> {
    if (whyNot) *whyNot = str(path, ": ", what, " failed (", std::strerror(errno), ")");
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());
    return std::nullopt;
  };
  constexpr std::size_t kChunk = std::size_t{4} << 20;
  const std::vector<std::uint64_t> chunk = noise(kChunk / sizeof(std::uint64_t));
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return failed("open", -1);
  for (std::uint64_t done = 0; done < total;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, total - done));
    const ssize_t wrote = ::write(fd, chunk.data(), n);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return failed("write", fd);
    done += static_cast<std::uint64_t>(wrote);
    heartbeat();  // Note [Heartbeats of local work]: a slow file system
  }
  if (::fsync(fd) != 0) return failed("fsync", fd);
  ::close(fd);
  if (::unlink(path.c_str()) != 0) return failed("unlink", -1);
  if (const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return WriteTime{total, seconds};
}

}  // namespace ddp::launcher
