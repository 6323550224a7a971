#include "runtime/signals.h"

#include <poll.h>

#include <atomic>
#include <csignal>

namespace ddp {
namespace {

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free flag");

extern "C" void onStopSignal(int signal) {
  received.store(signal, std::memory_order_relaxed);
  std::signal(signal, SIG_DFL);  // a second one acts at once
}

// Note [Broken pipes]. Async-signal-safe: poll, signal and raise.
extern "C" void onBrokenPipe(int signal) {
  for (const int stream : {1, 2}) {
    pollfd fd{stream, POLLOUT, 0};
    if (::poll(&fd, 1, 0) == 1 && (fd.revents & POLLERR) != 0) {
      std::signal(signal, SIG_DFL);
      std::raise(signal);  // delivered when this handler returns
      return;
    }
  }
}

}  // namespace

void installBrokenPipeHandler() {
  std::signal(SIGPIPE, onBrokenPipe);
}

void installStopHandlers() {
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  std::signal(SIGUSR1, onStopSignal);  // Note [Stopping under mpirun]
  // Note [A closed terminal]: unless it is ignored (nohup) already.
  struct sigaction hangUp {};
  if (::sigaction(SIGHUP, nullptr, &hangUp) == 0 && hangUp.sa_handler != SIG_IGN)
    std::signal(SIGHUP, onStopSignal);
}

int stopSignal() {
  return received.load(std::memory_order_relaxed);
}

}  // namespace ddp
