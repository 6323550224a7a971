// Small TCP helpers for the watchdog's side channel (comm/watchdog.h).
//
// Everything here is blocking with a deadline: a peer that is gone, stalled or
// behind a cut link costs at most the deadline, never a hang. IPv4 only, as
// Open MPI's TCP transport uses by default.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::net {

using Deadline = std::chrono::steady_clock::time_point;

// Owns a file descriptor; closes it on destruction. Never throws.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// A socket listening on every IPv4 interface, on a port the kernel picks.
// Throws CommError.
struct Listener {
  Fd fd;
  std::uint16_t port = 0;
};
Listener listenTcp();

// This host's IPv4 addresses, loopback last ("10.0.0.2", ..., "127.0.0.1").
std::vector<std::string> localAddresses();

// The `error` connectTcp sets when the deadline passed without an answer.
inline constexpr const char* kTimedOut = "timed out";

// Connects to address:port before `deadline`. Returns an invalid Fd and sets
// `error` (strerror's text, e.g. "Connection refused", or kTimedOut) on
// failure. Never throws.
Fd connectTcp(const std::string& address, std::uint16_t port, Deadline deadline,
              std::string& error);

// Writes all of `data`; false on error or deadline.
bool sendAll(int fd, const std::string& data, Deadline deadline);
// Reads until the peer closes the connection (or `limit` bytes); false on
// error or deadline.
bool receiveAll(int fd, std::string& data, Deadline deadline, std::size_t limit = 1 << 20);
// Reads one line (without its '\n'); false on error, deadline or `limit`.
bool receiveLine(int fd, std::string& line, Deadline deadline, std::size_t limit = 256);

}  // namespace ddp::net
