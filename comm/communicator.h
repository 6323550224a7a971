// Communicator: the collectives every backend provides.
//
// One abstract interface, one concrete backend per folder (comm/mpi now,
// comm/nccl for GPUs). All calls are asynchronous and return a Work; they are
// executed in the order they were issued, and every rank must issue the same
// collectives in the same order (as with MPI and NCCL).
//
// Threading: issue calls from one thread (the training thread). Buffers are
// owned by the caller and must stay valid and unmodified until the Work's
// wait() returns. Buffers live where the backend expects them (host memory
// for MPI; device memory for NCCL).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/activity.h"
#include "comm/bfloat16.h"
#include "comm/types.h"
#include "comm/work.h"
#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::comm {

struct CommOptions {
  // How long wait() blocks before a collective is reported as hung.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Whether floating-point all-reduces report a non-finite result
  // (Work::resultChecks) where that costs a pass of its own: the MPI
  // backend's plain path then scans the result on its communication thread.
  // The shared-memory path reports it always, at no cost (Note [Non-finite
  // check while reducing] in comm/finite.h).
  bool checkNonFinite = false;
  // Whether float32 all-reduces report the sum of the squares of their
  // result (Work::resultChecks), for gradient clipping: the MPI
  // backend's shared-memory path sums them while reducing, its plain path on
  // the communication thread (Note [Sum of squares while reducing] in
  // comm/finite.h). Every rank must ask alike.
  bool sumOfSquares = false;
  // Whether the MPI backend all-reduces memory from allocate() in two levels
  // when a job spans nodes with the same number of ranks on each (Note
  // [Two-level all-reduce across nodes] in comm/mpi/shared_memory.h), or
  // with one MPI_Allreduce over every rank. Every rank must ask alike.
  bool twoLevelAcrossNodes = true;
};

// Throws InternalError unless `bounds` can be Communicator::reduceScatter's
// for `worldSize` ranks: worldSize + 1 of them, the first 0, none decreasing.
inline void checkScatterBounds(std::span<const std::size_t> bounds, int worldSize) {
  DDP_CHECK(bounds.size() == static_cast<std::size_t>(worldSize) + 1 && bounds.front() == 0,
            "reduceScatter: bounds must have world size + 1 entries, the first 0");
  DDP_CHECK(std::is_sorted(bounds.begin(), bounds.end()),
            "reduceScatter: bounds must not decrease");
}

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi" or "nccl", for start-up summaries and error messages.
  virtual std::string backendName() const = 0;
  // The backend and how it reduces in this job, for start-up summaries,
  // e.g. "mpi (two levels: node shared memory, MPI between the nodes)".
  virtual std::string describe() const { return backendName(); }
  const CommOptions& options() const { return options_; }

  // What the caller is doing ("step 1200, bucket 2 of 3"). Every collective
  // issued afterwards carries it in its description, so a timeout or failure
  // report says where the program was. Issuing thread only.
  void setContext(std::string context) {
    activity_.setContext(context);
    context_ = std::move(context);
  }
  const std::string& context() const { return context_; }

  // What this communicator's collectives are doing, for the watchdog
  // (comm/watchdog.h): one log per independent stream of collectives (NCCL
  // keeps a second, MPI one for host memory). Any thread.
  virtual std::vector<const ActivityLog*> activityLogs() const { return {&activity_}; }

  // In place: every rank ends with op over all ranks' `count` elements.
  WorkPtr allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
    return allreduce(data, data, count, type, op);
  }
  // Out of place: `recv` ends with op over all ranks' `send` (`count`
  // elements each) and `send` is left as it was; send == recv is the in-place
  // call. The buffers must not otherwise overlap.
  virtual WorkPtr allreduce(const void* send, void* recv, std::size_t count, DataType type,
                            ReduceOp op) = 0;
  // In place, each rank keeping its own part: `bounds` (size() + 1
  // nondecreasing offsets, bounds[0] = 0, bounds[size()] = the element count)
  // gives rank r elements [bounds[r], bounds[r+1]), and rank r ends with op
  // over all ranks' values of those elements, where they are in its buffer;
  // the rest of its buffer is left unspecified (it may be overwritten). Parts
  // may be empty. This is what a sharded optimizer needs of the averaged
  // gradient (Note [Reduce-scatter for a sharded optimizer] in
  // comm/reducer.h): half the bytes of an all-reduce on a ring. The Work's
  // resultChecks, where the backend measures them, describe the whole result
  // (every rank's part) and are the same on every rank, as an all-reduce's.
  // `bounds` is copied before the call returns.
  virtual WorkPtr reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type,
                                ReduceOp op) = 0;
  // In place: every rank ends with `root`'s `count` elements.
  virtual WorkPtr broadcast(void* data, std::size_t count, DataType type, int root) = 0;
  // `recv` (size() * count elements) ends with rank r's `count` elements at
  // r * count. In place when send == recv + rank() * count: this rank's part
  // is already where it belongs (NCCL's in-place form; MPI_IN_PLACE on MPI),
  // which is how a sharded optimizer shares its updated parameters.
  virtual WorkPtr allgather(const void* send, void* recv, std::size_t count, DataType type) = 0;
  // On `root`, `recv` (size() * count elements) ends with rank r's `count`
  // elements at r * count; elsewhere `recv` is unused (may be null). Host
  // memory on every backend: it serves checkpoints, which rank 0 writes from
  // host memory (a sharded optimizer's state: trainer/sharded_optimizer.h).
  virtual WorkPtr gather(const void* send, void* recv, std::size_t count, DataType type,
                         int root) = 0;
  virtual WorkPtr barrier() = 0;

  // Zero-filled, 64-byte aligned memory for `bytes` bytes that this backend
  // reduces and gathers fastest (MPI: memory shared by the ranks of a node,
  // so an all-reduce or all-gather needs no copies through the library; see
  // Notes [Node shared-memory all-reduce] and [Node shared-memory all-gather]
  // in comm/mpi/shared_memory.h). Collective: every
  // rank calls it with the same size, in the same order as its other
  // collectives. The memory stays valid while the returned owner lives, and
  // at most as long as the communicator.
  //
  // An all-reduce or all-gather on such memory must be issued by every rank
  // on the same offset of the same allocation (as SPMD training code does);
  // ranks that disagree are detected and get a MismatchError.
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;
  // Where allocate() puts memory: host memory (MPI) or device memory (NCCL).
  // Code that touches allocated memory on the host (the Reducer's bf16 hook)
  // asks this instead of the backend's name.
  enum class Memory { kHost, kDevice };
  virtual Memory allocatedMemory() const = 0;

  // The bf16 hook's conversions (Reducer, GradCompression::kBf16) between
  // float32 gradients and bfloat16 wire values, `count` elements in memory
  // from allocate(), with comm/bfloat16.h's rounding (to nearest, ties to
  // even; a NaN stays a NaN). Issuing thread only. Host memory (MPI): done
  // on the calling thread before they return. Device memory (NCCL): queued
  // on the compute stream, ahead of the next collective's `ready` event
  // (Note [NCCL stream ordering]), and they return at once.
  virtual void narrowToBFloat16(const float* in, std::uint16_t* out, std::size_t count) {
    toBFloat16(in, out, count);
  }
  virtual void widenFromBFloat16(const std::uint16_t* in, float* out, std::size_t count) {
    fromBFloat16(in, out, count);
  }

  // Note [bf16 rounding inside the reduction]
  // The bf16 hook narrows every bucket into a staging buffer, reduces that,
  // and widens the result back: two extra passes over the gradients, and
  // the staging buffer (half the gradients' size) on every rank. That pays
  // where the reduction moves the bytes over a wire. In node shared memory
  // (Note [Node shared-memory all-reduce]) nothing crosses a wire, and the
  // passes were the whole cost (1.14x the float32 step, benchmarks/RESULTS.md).
  // There the rounding is done inside the reduction instead: each rank's
  // float32 value is rounded to bfloat16 as it is read, the rounded values
  // are summed in float32 in rank order, and the result is rounded once and
  // stored widened. Those are the staged path's operations in its order, so
  // the result has its bits, with float32 memory traffic and no staging.
  // Between nodes the MPI backend runs the staged path itself, on its
  // communication thread, a piece at a time (Note [bf16 rounding between
  // nodes]); only the NCCL backend leaves the staging to the Reducer.
  //
  // Whether this backend has allreduceViaBFloat16() and
  // reduceScatterViaBFloat16() (for any memory from allocate()): a property
  // of the backend, the same on every rank, so callers may decide on it
  // whether to allocate() a staging buffer (a collective). Any thread.
  virtual bool reducesViaBFloat16InPlace() const { return false; }
  // Where reducesViaBFloat16InPlace(): allreduce() and reduceScatter() of
  // `count` float32 values at `data`, in place, with every rank's values
  // rounded to bfloat16 and the result rounded again: the bits that
  // narrowToBFloat16, a kBFloat16 collective and widenFromBFloat16 would
  // leave. `op`: sum or average. The Work's resultChecks are those of the
  // rounded result. Called elsewhere, they throw InternalError.
  virtual WorkPtr allreduceViaBFloat16(float* data, std::size_t count, ReduceOp op) {
    (void)data, (void)count, (void)op;
    throw InternalError(str(backendName(), " has no in-place bfloat16 all-reduce"));
  }
  virtual WorkPtr reduceScatterViaBFloat16(float* data, std::span<const std::size_t> bounds,
                                           ReduceOp op) {
    (void)data, (void)bounds, (void)op;
    throw InternalError(str(backendName(), " has no in-place bfloat16 reduce-scatter"));
  }

  // Fault injection (ddp_train --inject-fault hang): the next collective
  // this rank issues (a device one, under NCCL) waits `hold` where the
  // library runs it, before it starts: on the communication thread (MPI),
  // or on the communication stream, as a host function (NCCL). It is then
  // pending with every peer arrived, as when the network or the library is
  // stuck, while the issuing thread goes on. Issuing thread. A backend
  // without it throws UsageError.
  virtual void holdNextCollective(std::chrono::milliseconds hold) {
    (void)hold;
    throw UsageError(
        str("--inject-fault hang: the ", backendName(), " backend cannot hold a collective"));
  }

  // Typed conveniences over the calls above.
  template <class T>
  WorkPtr allreduce(std::span<T> data, ReduceOp op) {
    return allreduce(data.data(), data.size(), dataTypeOf<T>(), op);
  }
  template <class T>
  WorkPtr broadcast(std::span<T> data, int root) {
    return broadcast(data.data(), data.size(), dataTypeOf<T>(), root);
  }
  template <class T>
  WorkPtr allgather(std::span<const T> send, std::span<T> recv) {
    return allgather(send.data(), recv.data(), send.size(), dataTypeOf<T>());
  }

  // Blocking forms: issue and wait with the communicator's timeout.
  template <class T>
  void allreduceSync(std::span<T> data, ReduceOp op) {
    allreduce(data, op)->wait(options_.timeout);
  }
  template <class T>
  void broadcastSync(std::span<T> data, int root) {
    broadcast(data, root)->wait(options_.timeout);
  }

 protected:
  explicit Communicator(CommOptions options, std::string channel)
      : options_(options), activity_(std::move(channel)) {}

  // The number the next collective will get (0, 1, ...): its position in
  // this communicator's issue order, equal on every rank.
  std::uint64_t nextSequence() const { return sequence_; }
  // Numbers a new collective, names it for error reports ("allreduce(float32
  // x 10, sum) #12 on rank 3 (step 7, bucket 1 of 2)", with `where` after
  // the rank) and records it in the activity log. Issuing thread.
  template <class W, class... Args>
  std::shared_ptr<W> newWork(const std::string& what, const std::string& where, Args&&... args) {
    const std::uint64_t sequence = sequence_++;
    auto work =
        std::make_shared<W>(str(what, " #", sequence, " on rank ", rank(), where,
                                context_.empty() ? std::string() : str(" (", context_, ")")),
                            std::forward<Args>(args)...);
    activity_.issued(sequence, what, context_, work);
    return work;
  }

 private:
  CommOptions options_;
  std::string context_;
  ActivityLog activity_;
  std::uint64_t sequence_ = 0;
};

}  // namespace ddp::comm
