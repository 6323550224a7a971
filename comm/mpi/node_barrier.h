// A barrier for the processes of one node, in memory they share.
//
// Note [Sleeping barrier]
// MPI_Barrier busy-polls. That is right when every rank arrives at once, but
// a bucket's all-reduce starts while backward still runs: its communication
// thread then waits for slower peers on the core the rank computes on, and
// polling takes that core from the computation (measured: backward 5 -> 8 ms
// at np=2 on 2 cores). This barrier spins for a few microseconds, which
// covers ranks that arrive together, and then sleeps on a futex until the
// last rank arrives and wakes everyone. It also gives up at a deadline, so a
// dead or stalled peer becomes an error instead of a hang.
//
// The state is two counters on their own cache lines in shared memory (zero
// is the valid initial state). Process-shared atomics and futexes work on
// Linux for lock-free 32-bit integers in a MAP_SHARED mapping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ddp::comm {

struct alignas(64) NodeBarrierState {
  std::atomic<std::uint32_t> arrived{0};
  alignas(64) std::atomic<std::uint32_t> generation{0};
};

class NodeBarrier {
 public:
  // `state` lives in memory shared by the `size` participants.
  NodeBarrier(NodeBarrierState* state, int size)
      : state_(state), size_(static_cast<std::uint32_t>(size)) {}

  // Returns once all `size` participants have called wait() for this round.
  // Throws CommTimeoutError (naming `what`) if that takes longer than `timeout`;
  // the barrier is then unusable, as the job must stop anyway.
  void wait(std::chrono::milliseconds timeout, const char* what);

 private:
  NodeBarrierState* state_;
  std::uint32_t size_;
};

}  // namespace ddp::comm
