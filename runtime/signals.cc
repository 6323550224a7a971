#include "runtime/signals.h"

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

}  // namespace

void installStopHandlers() {
  std::signal(SIGTERM, onStopSignal);
  std::signal(SIGINT, onStopSignal);
  std::signal(SIGUSR1, onStopSignal);  // Note [Stopping under mpirun]
}

int stopSignal() {
  return received.load(std::memory_order_relaxed);
}

}  // namespace ddp
