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
//
// Note [Two-level all-reduce across nodes]
// When a job spans nodes, MPI_Allreduce over all N ranks treats a rank on
// the same node like one across the network: each reduction step is a
// message, through Open MPI's fragments or TCP, and the algorithm takes
// steps in proportion to N. With L ranks on each of M nodes (the same L on
// every node), the MPI backend all-reduces memory from allocate() in two
// levels instead, as Horovod's hierarchical all-reduce does:
//   1. barrier; node rank r sums chunk r (the chunks of Note [Node
//      shared-memory all-reduce]) of every node rank's buffer, in node rank
//      order, into its own buffer only
//   2. node rank r all-reduces its chunk with node rank r of every other
//      node (MPI, on a communicator of those M ranks; Note [Plain
//      collectives in pieces]): L such all-reduces of 1/L of the buffer run
//      at once, each over M ranks
//   3. barrier; each rank copies every other chunk out of its owner's buffer
//   4. barrier (nobody changes a chunk while others copy it)
// Between the nodes this moves what a ring over the M nodes would, split
// over L connections, and inside a node one read and one write of the
// buffer per rank, with no library copies. An average is summed in steps 1
// and 2 and divided by N once, after step 2. Each chunk is summed over the
// node in node rank order, then across the nodes by one MPI call, so every
// rank ends with the same bits (not a one-level all-reduce's: the order of
// the additions differs). The checks (non-finite, sum of squares) are
// measured on each chunk after step 2 and added in node rank order. Via
// bfloat16 (Note [bf16 rounding between nodes] in
// comm/mpi/mpi_communicator.h), step 1 rounds each value and the node's sum
// to bfloat16, and step 2 narrows the chunk (exactly), sums it in bfloat16
// across the nodes, averages and widens it.
//
// Note [Two-level reduce-scatter across nodes]
// A sharded optimizer's reduce-scatter (Note [Node shared-memory
// reduce-scatter]) across such nodes: where each node's ranks are
// consecutive (node n holds ranks n L to n L + L - 1, mpirun's default
// placement), node n's ranks own one stretch of the result, and only that
// stretch must reach node n:
//   1. as the two-level all-reduce's step 1
//   2. node rank r reduce-scatters its chunk with node rank r of every other
//      node, cut where the nodes' stretches begin, so it ends with the
//      elements of its chunk that its own node owns
//   3. barrier; each rank copies the rest of its own part out of the
//      buffers of the node ranks whose chunks hold it
//   4. barrier
// Between the nodes this moves (M-1)/M of the buffer per node, half of what
// the all-reduce moves. The checks describe the whole result: each rank
// measures what it holds after step 2, the node adds them in node rank order
// and the nodes add theirs in node order (one small MPI_Allgather). The
// additions between the nodes are MPI_Reduce_scatter's, which may group
// them otherwise than MPI_Allreduce from three nodes on: float32 rounding
// apart from the all-reduce's, the same bits on every rank. Elsewhere the
// reduce-scatter is the two-level all-reduce, whose result holds every part.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
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
  // In-place all-reduce of `count` elements at `data` (in this rank's
  // segment) with every rank of a job whose nodes have this node's number of
  // ranks (Note [Two-level all-reduce across nodes]). `acrossNodes(begin,
  // end)` is step 2: it all-reduces elements [begin, end) of `data`, which
  // hold this node's sums, with the same node rank of every other node, in
  // place (an average: the sum, divided by the world size), and returns
  // their checks (fields present as the caller asked). It runs on this
  // thread, between the barriers; every node rank must pass the same `op`
  // and `rounding`. Communication thread; throws as allreduce() does, and
  // whatever acrossNodes throws (its node peers then time out).
  ResultChecks allreduceAcrossNodes(
      void* data, std::size_t count, DataType type, ReduceOp op, std::uint64_t sequence,
      std::chrono::milliseconds timeout, Rounding rounding,
      const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes);
  // In-place reduce-scatter across nodes (Note [Two-level reduce-scatter
  // across nodes]): this rank ends with the reduction of elements
  // [begin, end) of `data` (in this rank's segment), the world's `bounds`'
  // part of it; the rest is unspecified. `acrossNodes(chunkBegin, chunkEnd)`
  // is step 2: given this rank's chunk, which holds this node's sums, it
  // leaves in place the reduction of the elements of the chunk that this
  // node owns (an average: divided by the world size) and returns their
  // checks. Returns this node's checks, added in node rank order. Every node
  // rank must pass the same `bounds`, `op` and `rounding`. Communication
  // thread; throws as allreduceAcrossNodes() does.
  ResultChecks reduceScatterAcrossNodes(
      void* data, std::span<const std::size_t> bounds, std::size_t begin, std::size_t end,
      DataType type, ReduceOp op, std::uint64_t sequence, std::chrono::milliseconds timeout,
      Rounding rounding, const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes);
  // In-place all-gather (Note [Node shared-memory all-gather]): `data` (in
  // this rank's segment) holds node rank r's `count` elements at r x count,
  // this rank's already in place. Node ranks must be the communicator's ranks
  // (a one-node job). Communication thread; throws as allreduce() does.
  void allgather(void* data, std::size_t count, DataType type, std::uint64_t sequence,
                 std::chrono::milliseconds timeout);

 private:
  struct Control;  // one per rank, in the first page
  Control& control(int rank) const;
  // Where `data` (in this rank's segment) lies in it, in bytes.
  std::size_t offsetOf(const void* data) const;
  // Writes this rank's control slot, waits for every rank's, and throws
  // MismatchError unless all describe the same collective (`op`: a ReduceOp,
  // or the all-gather's mark).
  void arrive(std::size_t offset, std::size_t count, DataType type, std::uint32_t op,
              bool sumOfSquares, std::uint64_t boundsHash, std::uint64_t sequence,
              std::chrono::milliseconds timeout);
  // Steps 1 and 2 of Note [Two-level all-reduce across nodes] (`bounds`:
  // the reduce-scatter's, hashed into the arrival check, or empty). Returns
  // the chunks' bounds (one more than the node ranks) and step 2's checks.
  std::pair<std::vector<std::size_t>, ResultChecks> reduceOwnChunk(
      void* data, std::size_t count, std::span<const std::size_t> bounds, DataType type,
      ReduceOp op, std::uint64_t sequence, std::chrono::milliseconds timeout, Rounding rounding,
      const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes);
  // Publishes `own` in this rank's control slot, waits at the gathering
  // barrier (step 3's), and returns every node rank's checks added in node
  // rank order (the fields `own` has).
  ResultChecks gatherChecks(const ResultChecks& own, std::chrono::milliseconds timeout,
                            const char* where);
  // Step 3: elements [begin, end) of the collective at `offset`, from the
  // buffer of the node rank whose chunk (`chunks`, one more than the node
  // ranks) holds them into this rank's, but for this rank's own chunk.
  void copyFromOwners(std::size_t offset, std::size_t element, std::span<const std::size_t> chunks,
                      std::size_t begin, std::size_t end);
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
