#include "runtime/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace ddp::net {
namespace {

// Milliseconds left before `deadline`, at least 0, for poll().
int millisecondsLeft(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

// Waits for `events` on `fd`; false on deadline or error.
bool waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, millisecondsLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Listener listenTcp() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw CommError(str("watchdog: socket(): ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd.get(), 64) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw CommError(str("watchdog: cannot listen on a TCP port: ", std::strerror(errno)));
  }
  return Listener{std::move(fd), ntohs(address.sin_port)};
}

std::vector<std::string> localAddresses() {
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      char text[INET_ADDRSTRLEN] = {};
      if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) continue;
      if (ntohl(in->sin_addr.s_addr) >> 24 == 127) continue;  // loopback goes last
      addresses.emplace_back(text);
    }
    ::freeifaddrs(list);
  }
  addresses.emplace_back("127.0.0.1");
  return addresses;
}

Fd connectTcp(const std::string& address, std::uint16_t port, Deadline deadline,
              std::string& error) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) {
    error = str("bad address '", address, "'");
    return Fd();
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    error = std::strerror(errno);
    return Fd();
  }
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
      return Fd();
    }
    if (!waitFor(fd.get(), POLLOUT, deadline)) {
      error = kTimedOut;
      return Fd();
    }
    int status = 0;
    socklen_t length = sizeof status;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &status, &length);
    if (status != 0) {
      error = std::strerror(status);
      return Fd();
    }
  }
  return fd;
}

bool sendAll(int fd, const std::string& data, Deadline deadline) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    if (!waitFor(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool receiveAll(int fd, std::string& data, Deadline deadline, std::size_t limit) {
  char chunk[4096];
  for (;;) {
    if (!waitFor(fd, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    data.append(chunk, static_cast<std::size_t>(n));
    if (data.size() > limit) return false;
  }
}

bool receiveLine(int fd, std::string& line, Deadline deadline, std::size_t limit) {
  line.clear();
  for (;;) {
    if (!waitFor(fd, POLLIN, deadline)) return false;
    char c = 0;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    if (c == '\n') return true;
    line.push_back(c);
    if (line.size() > limit) return false;
  }
}

}  // namespace ddp::net
