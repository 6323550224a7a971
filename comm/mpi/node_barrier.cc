#include "comm/mpi/node_barrier.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"

namespace ddp::comm {
namespace {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

constexpr int kSpins = 4000;  // ~10-40 us: ranks that arrive together never sleep

void futexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected, long nanoseconds) {
  timespec relative{nanoseconds / 1'000'000'000, nanoseconds % 1'000'000'000};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &relative,
          nullptr, 0);
}

void futexWakeAll(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void NodeBarrier::wait(std::chrono::milliseconds timeout, const char* what) {
  const std::uint32_t generation = state_->generation.load(std::memory_order_acquire);
  if (state_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    // Last to arrive: reset for the next round before releasing anyone, so
    // nobody can enter the next round and count against this one.
    state_->arrived.store(0, std::memory_order_relaxed);
    state_->generation.fetch_add(1, std::memory_order_release);
    futexWakeAll(&state_->generation);
    return;
  }
  for (int i = 0; i < kSpins; ++i) {
    if (state_->generation.load(std::memory_order_acquire) != generation) return;
    cpuRelax();
  }
  // Note [Time the process was stopped]: only time this process ran counts.
  stops::Deadline deadline(timeout);
  while (state_->generation.load(std::memory_order_acquire) == generation) {
    if (deadline.passed()) {
      throw CommTimeoutError(str("rank ", log::processRank(), ": ", what, ": waited ",
                                 timeout.count() / 1000.0, " s for the other ranks of this node (",
                                 size_ - state_->arrived.load(), " of ", size_,
                                 " had not arrived; a peer may have died or stalled)"));
    }
    // Sleep until woken, at most 100 ms at a time so the deadline is checked.
    const auto next = deadline.nextLook() - std::chrono::steady_clock::now();
    const long slice = std::clamp<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(next).count(), 0, 100'000'000);
    futexWait(&state_->generation, generation, slice);
  }
}

}  // namespace ddp::comm
