// The MPI backend of Communicator, for host memory.
//
// Note [MPI communication thread]
// Open MPI (Debian's 4.1) has no asynchronous progress: a nonblocking
// MPI_Iallreduce advances only while some MPI call runs, and its libnbc path is
// about 2x slower than the tuned blocking MPI_Allreduce (measured, see
// ../shared/TOOLCHAIN.md). So each MpiCommunicator owns one communication
// thread that runs the blocking collectives in issue order; the training
// thread enqueues and continues computing, and blocks only in Work::wait().
// One thread per communicator keeps the order identical on every rank, which
// MPI requires, without any cross-rank negotiation.
#pragma once

#include <mpi.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/communicator.h"
#include "comm/mpi/shared_memory.h"

namespace ddp::comm {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `base` (so our traffic never matches anyone else's messages) and
  // starts the communication thread. Collective over `base`. Requires
  // MPI_THREAD_MULTIPLE (World asks for it). Throws CommError.
  MpiCommunicator(MPI_Comm base, CommOptions options);
  // Drains the queue, stops the thread and frees the communicator. Never throws.
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return "mpi"; }
  std::string describe() const override { return description_; }

  WorkPtr allreduce(const void* send, void* recv, std::size_t count, DataType type,
                    ReduceOp op) override;
  // Memory from allocate(): the first half of the shared-memory all-reduce
  // (Note [Node shared-memory reduce-scatter]), or across nodes the whole
  // two-level all-reduce (Note [Two-level all-reduce across nodes]), which
  // holds every part; elsewhere MPI_Reduce_scatter.
  // Where CommOptions ask for checks, the plain path measures its own part
  // on the communication thread and the ranks add their parts in rank order.
  WorkPtr reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type,
                        ReduceOp op) override;
  WorkPtr broadcast(void* data, std::size_t count, DataType type, int root) override;
  WorkPtr allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  WorkPtr gather(const void* send, void* recv, std::size_t count, DataType type, int root) override;
  WorkPtr barrier() override;
  // The next collective's task sleeps `hold` on the communication thread
  // before its MPI call (--inject-fault hang).
  void holdNextCollective(std::chrono::milliseconds hold) override { hold_ = hold; }
  // Node-shared memory when every rank of this communicator is on one node
  // (Note [Node shared-memory all-reduce]) or when all-reduces go in two
  // levels (twoLevel()); plain host memory otherwise.
  std::shared_ptr<void> allocate(std::size_t bytes) override;
  // Whether all-reduces and reduce-scatters of memory from allocate() go in
  // two levels (Note [Two-level all-reduce across nodes]): the job spans
  // nodes, each with the same number of ranks, more than one, and
  // CommOptions::twoLevelAcrossNodes. The same answer on every rank.
  bool twoLevel() const { return acrossNodes_ != MPI_COMM_NULL; }
  // Whether every rank of this communicator is on this node.
  bool singleNode() const { return singleNode_; }
  Memory allocatedMemory() const override { return Memory::kHost; }
  // Any host memory: node shared memory rounds inside the sum (Note [bf16
  // rounding inside the reduction]), and elsewhere the communication thread
  // runs the staged path itself, a piece at a time.
  //
  // Note [bf16 rounding between nodes]
  // Between nodes the bytes cross MPI, and halving them is what bfloat16 is
  // for, so the values must be narrowed before the call and widened after
  // it. When the Reducer did that (the staged path) it took two passes over
  // every gradient on the training thread, narrowing while backward waited
  // and widening after the last bucket, and a staging buffer half the
  // gradients' size on every rank. Here the communication thread does it,
  // for each piece of Note [Plain collectives in pieces] in turn: narrow the
  // piece into one piece-sized buffer, all-reduce (or reduce-scatter) it with
  // the bfloat16 sum, average in bfloat16, widen it back. Each element meets
  // the staged path's operations, and each piece is the same MPI call on the
  // same elements (the staged path's pieces of kBFloat16 are cut alike), so
  // the bits are the staged path's; the training thread goes on with
  // backward meanwhile, and the staging is one piece (4 MiB).
  bool reducesViaBFloat16InPlace() const override { return true; }
  WorkPtr allreduceViaBFloat16(float* data, std::size_t count, ReduceOp op) override;
  WorkPtr reduceScatterViaBFloat16(float* data, std::span<const std::size_t> bounds,
                                   ReduceOp op) override;

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;

 private:
  struct Task {
    WorkPtr work;
    std::function<void(Work&)> run;  // the blocking MPI call(s)
  };
  // Decides, with every rank, whether collectives go in two levels (Note
  // [Two-level all-reduce across nodes]): sets acrossNodes_, nodeBlocks_ and
  // description_. Constructor only; collective over comm_.
  void chooseLevels(bool wanted);
  WorkPtr enqueue(const std::string& what, std::function<void(Work&)> run);
  void loop();
  // The live shared region holding [data, data + bytes), or null. Any thread.
  std::shared_ptr<SharedRegion> findRegion(const void* data, std::size_t bytes) const;
  // The plain path's two piece buffers, allocated at first use: Note [bf16
  // rounding between nodes] rounds into the first, Note [Plain
  // reduce-scatter in stripes] packs into the first and receives into the
  // second. Comm thread only.
  char* pieceBuffer(std::size_t which);
  // The collectives behind allreduce() and reduceScatter() and their
  // ...ViaBFloat16() forms (Rounding::kBFloat16: float32 data).
  WorkPtr allreduce(const void* send, void* data, std::size_t count, DataType type, ReduceOp op,
                    Rounding rounding);
  WorkPtr reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type, ReduceOp op,
                        Rounding rounding);
  // Note [Plain collectives in pieces]: `count` elements all-reduced over
  // `comm` in place (or from `send`), an average divided by this
  // communicator's size (`comm` may be a part of it: acrossNodes_). Comm
  // thread only.
  void allreducePlain(MPI_Comm comm, const void* send, void* data, std::size_t count, DataType type,
                      ReduceOp op, Rounding rounding);
  // Note [Plain reduce-scatter in stripes]: an in-place reduce-scatter over
  // `comm`, whose rank `me` ends with the reduction of elements
  // [parts[me], parts[me + 1]) of `data` in their place (`parts`: one more
  // than comm's ranks, the first 0), an average divided by this
  // communicator's size (`comm` may be a part of it). Comm thread only.
  void reduceScatterPlain(MPI_Comm comm, int me, void* data, std::span<const std::size_t> parts,
                          DataType type, ReduceOp op, Rounding rounding);
  // Note [Two-level reduce-scatter across nodes], in place in `region`,
  // with the whole result's checks. Comm thread only.
  ResultChecks reduceScatterInTwoLevels(SharedRegion& region, void* data,
                                        std::span<const std::size_t> bounds, DataType type,
                                        ReduceOp op, std::uint64_t sequence, Rounding rounding);
  // Note [Two-level all-reduce across nodes], in place in `region`. Comm thread only.
  ResultChecks allreduceInTwoLevels(SharedRegion& region, void* data, std::size_t count,
                                    DataType type, ReduceOp op, std::uint64_t sequence,
                                    Rounding rounding);
  // The checks CommOptions ask for, of `count` elements of a result at
  // `data`; `nonFiniteAlways`: the non-finite check for any floating type
  // whether asked or not (memory from allocate() always reports it).
  ResultChecks measure(const void* data, std::size_t count, DataType type,
                       bool nonFiniteAlways = false) const;
  // `mine` (this rank's part's checks) added to every rank's of `comm`, in
  // rank order: the same bits on every rank; the fields `mine` has. Comm thread only.
  ResultChecks addOverRanks(MPI_Comm comm, const ResultChecks& mine);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;  // the ranks of comm_ on this node
  bool singleNode_ = false;
  // Node rank r's peers on every node (Note [Two-level all-reduce across
  // nodes]); MPI_COMM_NULL unless all-reduces go in two levels.
  MPI_Comm acrossNodes_ = MPI_COMM_NULL;
  int nodeSize_ = 1;         // ranks on this node
  int nodeRank_ = 0;         // this rank's place among them
  bool nodeBlocks_ = false;  // two levels, and node n holds ranks [n nodeSize_, (n + 1) nodeSize_)
  std::string description_ = "mpi";  // describe()
  // Added by allocate() on the comm thread; read by findRegion() on any.
  mutable std::mutex regionsMutex_;
  mutable std::vector<std::weak_ptr<SharedRegion>> regions_;
  // The plain path's per-rank piece counts, displacements and part checks,
  // kept so that a collective allocates none of its own. Comm thread only.
  std::vector<int> pieceCounts_, pieceDisplacements_;
  std::vector<double> partChecks_;
  std::vector<std::size_t> nodeCuts_;  // reduceScatterInTwoLevels' parts of a chunk
  std::array<std::unique_ptr<std::max_align_t[]>, 2> pieceBuffers_;
  int rank_ = 0;
  int size_ = 1;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> queue_;
  std::chrono::milliseconds hold_{0};  // holdNextCollective's; issuing thread
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddp::comm
