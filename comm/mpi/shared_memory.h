// Node-local shared memory for the MPI backend, and the all-reduce that uses it.
//
// Note [Node shared-memory all-reduce]
// Open MPI's all-reduce moves every byte through its own shared-memory
// fragments: copy in, copy out into a temporary, sum, on every rank. For a
// 7 MiB gradient at np=2 that is ~3 ms on the 2-core development machines,
// a third of a training step. When the ranks' buffers themselves live in
// memory that every rank on the node has mapped, the all-reduce needs no
// library copies at all:
//   1. barrier                 (every rank's data is written)
//   2. rank r sums chunk r of every rank's buffer, in rank order, and stores
//      the result into chunk r of every rank's buffer
//   3. barrier                 (every chunk is reduced everywhere)
// Only rank r ever reads or writes chunk r during step 2, so no two ranks
// touch the same bytes, and after step 3 nobody touches a rank's buffer until
// that rank issues its next all-reduce. Each element is summed by one rank, in
// the order rank 0, 1, ..., N-1, so every rank ends with bit-identical results
// and runs are deterministic. Each rank reads and writes the buffer size once:
// measured in benchmarks/RESULTS.md against MPI_Allreduce. The barriers are
// NodeBarrier (Note [Sleeping barrier]) in the region's first page.
//
// Each allocation is one POSIX shared-memory object per node: a control slot
// per rank (used to check that all ranks reduce the same thing, which turns a
// desynchronised program into an error instead of garbage), then one segment
// per rank. The object is unlinked as soon as every rank has mapped it, so
// nothing is left in /dev/shm even if the job is killed; unmapping is local,
// so freeing never needs the other ranks. Its pages are reserved when it is
// created (posix_fallocate): a /dev/shm too small for them (a container's,
// 64 MiB by default under Docker) is then an error the ranks agree on, and
// MpiCommunicator::allocate falls back to plain memory with a warning,
// where pages first touched mid-step would have ended every rank with SIGBUS.
//
// Note [Node shared-memory reduce-scatter]
// A sharded optimizer needs of each averaged gradient only its own part
// (Note [Reduce-scatter for a sharded optimizer] in comm/reducer.h). The
// shared-memory reduce-scatter is the all-reduce above with step 2 storing
// less: rank r still sums chunk r of every rank's buffer in rank order, but
// stores each element only into the buffer of the rank whose part holds it,
// not into every rank's. The chunks do not follow the parts, so the work
// stays divided evenly however the parts fall, and each element is summed by
// the same rank in the same order as in the all-reduce: a rank's part holds
// the all-reduce's bits, and the checks (non-finite, sum of squares) are the
// all-reduce's, of the whole result. It writes 1/N of what the all-reduce
// writes.
//
// Note [Node shared-memory all-gather]
// A sharded optimizer (trainer/sharded_optimizer.h) all-gathers the weights
// every step, in place. Through MPI_Allgather each byte is copied into Open
// MPI's fragments and out again. In shared memory each rank copies the
// other ranks' parts straight out of their segments:
//   1. barrier                 (every rank's part is written)
//   2. rank r copies part q of rank q's segment into its own, for every q != r
//   3. barrier                 (nobody changes its part while others read it)
// Rank r writes only its own segment, and nothing writes the parts being read.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "comm/mpi/node_barrier.h"
#include "comm/types.h"
#include "comm/work.h"

namespace ddp::comm {

// How a float32 reduction treats its values: as they are, or each rank's
// rounded to bfloat16 as it is read and the result rounded again (Note [bf16
// rounding inside the reduction] in comm/communicator.h).
enum class Rounding { kNone, kBFloat16 };

class SharedRegion {
 public:
  // Collective over `node` (all ranks of one node). Maps `bytes` bytes per rank.
  // Throws CommError if shared memory cannot be created.
  SharedRegion(MPI_Comm node, std::size_t bytes);
  ~SharedRegion();  // unmaps; never throws, never communicates
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // This rank's segment.
  void* data() const { return segments_[static_cast<std::size_t>(rank_)]; }
  std::size_t bytes() const { return bytes_; }
  bool contains(const void* begin, std::size_t length) const;

  // In-place all-reduce of `count` elements at `data` (inside this rank's
  // segment) with every rank of the node. Runs on the communication thread.
  // Throws MismatchError if the ranks asked for different reductions, and
  // CommTimeoutError if a peer does not arrive within `timeout`. Returns
  // what it learnt of the result (floating types: whether it is finite; for
  // float32 with `sumOfSquares`, the sum of its squares; comm/finite.h);
  // every rank must pass the same `sumOfSquares` and `rounding`
  // (Rounding::kBFloat16: float32, sum or average only).
  ResultChecks allreduce(void* data, std::size_t count, DataType type, ReduceOp op,
                         std::uint64_t sequence, std::chrono::milliseconds timeout,
                         bool sumOfSquares = false, Rounding rounding = Rounding::kNone);
  // In-place reduce-scatter (Note [Node shared-memory reduce-scatter]):
  // node rank r ends with the reduction of elements [bounds[r], bounds[r+1])
  // of `data` (in this rank's segment), the rest unspecified; the checks
  // describe the whole result, as allreduce()'s. Node ranks must be the
  // communicator's ranks. Communication thread; throws as allreduce() does.
  ResultChecks reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type,
                             ReduceOp op, std::uint64_t sequence, std::chrono::milliseconds timeout,
                             bool sumOfSquares = false, Rounding rounding = Rounding::kNone);
  // In-place all-gather (Note [Node shared-memory all-gather]): `data` (in
  // this rank's segment) holds node rank r's `count` elements at r x count,
  // this rank's already in place. Node ranks must be the communicator's ranks
  // (a one-node job). Communication thread; throws as allreduce() does.
  void allgather(void* data, std::size_t count, DataType type, std::uint64_t sequence,
                 std::chrono::milliseconds timeout);

 private:
  struct Control;  // one per rank, in the first page
  Control& control(int rank) const;
  // Writes this rank's control slot, waits for every rank's, and throws
  // MismatchError unless all describe the same collective (`op`: a ReduceOp,
  // or the all-gather's mark).
  void arrive(std::size_t offset, std::size_t count, DataType type, std::uint32_t op,
              bool sumOfSquares, std::uint64_t boundsHash, std::uint64_t sequence,
              std::chrono::milliseconds timeout);
  // The all-reduce (`bounds` null) or reduce-scatter of `count` elements.
  ResultChecks reduce(void* data, std::size_t count, const std::size_t* bounds, DataType type,
                      ReduceOp op, std::uint64_t sequence, std::chrono::milliseconds timeout,
                      bool sumOfSquares, Rounding rounding);

  int rank_ = 0;
  int size_ = 1;
  std::size_t bytes_ = 0;
  void* mapping_ = nullptr;
  std::size_t mappingBytes_ = 0;
  std::vector<void*> segments_;
  NodeBarrier barrier_{nullptr, 1};
};

}  // namespace ddp::comm
