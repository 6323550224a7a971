#include "comm/mpi/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "comm/bfloat16.h"
#include "comm/finite.h"
#include "comm/mpi/stripes.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/memory.h"
#include "runtime/mpi_check.h"

namespace ddp::comm {
namespace {

MPI_Datatype mpiType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUInt8:
      return MPI_UINT8_T;
    case DataType::kBFloat16:
      return MPI_UINT16_T;  // summed by bfloat16SumOp(), never by MPI's own ops
  }
  throw InternalError("unknown DataType");
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;  // avg = sum, then scaled on this rank
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  throw InternalError("unknown ReduceOp");
}

// MPI has no bfloat16: a user op that adds in float32 and rounds once.
void bfloat16Sum(void* in, void* inout, int* length, MPI_Datatype*) {
  addBFloat16(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
              static_cast<std::size_t>(*length));
}

MPI_Op bfloat16SumOp() {
  static const MPI_Op kOp = [] {
    MPI_Op created = MPI_OP_NULL;
    DDP_MPI_CHECK(MPI_Op_create(&bfloat16Sum, /*commute=*/1, &created));
    return created;
  }();
  return kOp;
}

// Note [Plain collectives in pieces]
// Open MPI 4.1's collectives malloc temporaries the size of the message on
// every call and free them at its end. From 32 MiB (the most glibc's mmap
// threshold rises to) each is a fresh mmap whose pages fault in again on
// every call, costly on a VM: a 64 MiB MPI_Allreduce at np=2 took 163 ms,
// 12.7 ms with glibc's thresholds raised, and 64 MiB between two namespace
// "nodes" took 279 ms all-reduced, 572 ms reduce-scattered, against 13 and
// 9 ms at 16 MiB (benchmarks/RESULTS.md). A bucket cannot be made smaller
// than its largest gradient (a 4096 x 4096 layer is 64 MiB), so the plain
// path (between nodes) cuts every all-reduce and reduce-scatter into pieces
// of at most kPlainPieceBytes, one MPI call each, in order (a
// reduce-scatter's pieces are stripes of every rank's part: Note [Plain
// reduce-scatter in stripes]), and a sharded optimizer's all-gather into
// pieces of each rank's part. A piece costs one call's latency more (tens of
// microseconds, against milliseconds of transfer); each element is still
// reduced by one call, so every rank still ends with the same result. The
// node shared-memory path allocates nothing per call and reduces whole.
// Why not keep the temporaries in the heap and call MPI once per bucket:
// that takes three process-wide malloc settings (the communication thread
// allocates from an arena of its own, whose heaps are at most 64 MiB, so a
// 64 MiB call from it was mapped afresh whatever the thresholds until
// MALLOC_ARENA_MAX=1 too), and with all three set one call measured
// 0.84-0.88x these pieces' time between two nodes but 1.08-1.18x between
// four (RESULTS.md, "Pieces against one call, with the heap kept"): no
// gain worth changing how every allocation of the process is made.
constexpr std::size_t kPlainPieceBytes = std::size_t{4} << 20;
// The elements of a bfloat16 piece: the staged path's pieces, cut at the
// same elements (Note [bf16 rounding between nodes]).
constexpr std::size_t kBFloat16PieceCount = kPlainPieceBytes / sizeof(std::uint16_t);

// Note [Plain reduce-scatter in stripes]
// Open MPI 4.1's MPI_Reduce_scatter (its ring) mallocs a copy of the whole
// buffer and receive buffers the size of the largest part on every call,
// and frees them. When one rank's part is most of the call, together they
// pass glibc's trim threshold, glibc hands them back to the kernel at the
// free, and the next call faults every page in again: costly on a virtual
// machine. Back to back on the development VM, 4 MiB over four namespace
// nodes took 5.5 ms in equal parts, 109 ms all for one rank, 90 ms for two;
// with glibc's trimming out of the way, 6-10 ms each (benchmarks/RESULTS.md,
// "The plain reduce-scatter in stripes"). Whether a call is hit depends on
// what else the heap holds (inside training runs such calls were not slow),
// and even unhit, a ring whose call is one rank's part passes all of it
// around the ring. Pieces cut where the parts begin had that shape whenever
// a reduce-scatter spanned pieces (16 MiB over four ranks: 422 ms against
// 21 ms for one call), and a sharded optimizer's parts (Note
// [Reduce-scatter for a sharded optimizer]) are often empty. So:
//   - each rank's part is cut into the same number of stripes, as many as
//     the pieces the whole needs (comm/mpi/stripes.h), and call j reduces
//     stripe j of every part, packed in rank order into a piece buffer:
//     each call is spread over all ranks as their parts are, and carries
//     at most a piece. Packing copies the buffer once (via bfloat16 the
//     narrowing packs it); a buffer within one piece is reduced in place.
//   - a call where some rank's stripe is empty (an empty part, a part
//     shorter than the stripes are many, the two-level reduce-scatter's
//     cut of a chunk) is one MPI_Reduce per non-empty stripe, to its owner,
//     into the second piece buffer: 1.2-1.7x the equal parts' time, trimmed
//     or not (MPI_IN_PLACE at the root faulted like the ring: 7-8x).
// Each element is still reduced by one call, by its owner.

int mpiCount(std::size_t count) {
  DDP_CHECK(count <= static_cast<std::size_t>(INT_MAX),
            str("collective of ", count, " elements exceeds MPI's int count"));
  return static_cast<int>(count);
}

template <class T>
void scale(void* data, std::size_t count, double factor) {
  T* values = static_cast<T*>(data);
  const T f = static_cast<T>(factor);
  for (std::size_t i = 0; i < count; ++i)
    values[i] *= f;
}

// Throws UsageError for a reduction this backend does not define.
void checkReduction(const char* call, DataType type, ReduceOp op) {
  const bool floating =
      type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kBFloat16;
  if (op == ReduceOp::kAvg && !floating) {
    throw UsageError(str(call, ": average is defined for floating-point types only"));
  }
  if (type == DataType::kBFloat16 && op != ReduceOp::kSum && op != ReduceOp::kAvg) {
    throw UsageError(str(call, ": bfloat16 supports sum and average only"));
  }
}

// An average from MPI's sum: `count` elements of `type` at `data` divided by
// the world size.
void divideBy(int world, void* data, std::size_t count, DataType type) {
  if (world == 1) return;
  if (type == DataType::kBFloat16) {
    auto* values = static_cast<std::uint16_t*>(data);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = toBFloat16(fromBFloat16(values[i]) / static_cast<float>(world));
  }
  if (type == DataType::kFloat32) scale<float>(data, count, 1.0 / world);
  if (type == DataType::kFloat64) scale<double>(data, count, 1.0 / world);
}

// Whether `count` elements at `data` hold a NaN or an infinity (floating
// types; nothing for integers).
std::optional<bool> nonFiniteIn(const void* data, std::size_t count, DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return anyNonFinite(static_cast<const float*>(data), count);
    case DataType::kFloat64:
      return anyNonFinite(static_cast<const double*>(data), count);
    case DataType::kBFloat16:
      return anyNonFiniteBFloat16(static_cast<const std::uint16_t*>(data), count);
    default:
      return std::nullopt;
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm base, CommOptions options)
    : Communicator(options, "mpi") {
  DDP_MPI_CHECK(MPI_Comm_dup(base, &comm_));
  DDP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  pieceCounts_.resize(static_cast<std::size_t>(size_));
  pieceDisplacements_.resize(static_cast<std::size_t>(size_));
  partChecks_.resize(2 * static_cast<std::size_t>(size_));
  DDP_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_));
  DDP_MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN));
  DDP_MPI_CHECK(MPI_Comm_size(node_, &nodeSize_));
  DDP_MPI_CHECK(MPI_Comm_rank(node_, &nodeRank_));
  singleNode_ = nodeSize_ == size_;
  chooseLevels(options.twoLevelAcrossNodes);
  thread_ = std::thread([this] { loop(); });
}

void MpiCommunicator::chooseLevels(bool wanted) {
  // Note [Two-level all-reduce across nodes]: only when every node has this
  // node's number of ranks, and every rank asks for it (one agreed answer).
  int layout[3] = {-nodeSize_, nodeSize_, wanted ? 0 : 1};
  DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, layout, 3, MPI_INT, MPI_MAX, comm_));
  const bool evenNodes = -layout[0] == layout[1];
  if (singleNode_) {
    if (size_ > 1) description_ = "mpi (node shared memory)";
    return;
  }
  if (nodeSize_ == 1 || !evenNodes || layout[2] != 0) {
    description_ = str("mpi (one MPI_Allreduce over every rank: ",
                       !evenNodes       ? "the nodes have different numbers of ranks"
                       : nodeSize_ == 1 ? "one rank per node"
                                        : "two levels turned off",
                       ")");
    return;
  }
  DDP_MPI_CHECK(MPI_Comm_split(comm_, nodeRank_, rank_, &acrossNodes_));
  DDP_MPI_CHECK(MPI_Comm_set_errhandler(acrossNodes_, MPI_ERRORS_RETURN));
  description_ = "mpi (two levels: node shared memory, MPI between the nodes)";
  // Note [Two-level reduce-scatter across nodes] needs each node's ranks
  // consecutive, node n holding ranks n L to n L + L - 1 (mpirun's default
  // placement, --map-by slot).
  std::vector<int> here(static_cast<std::size_t>(nodeSize_));
  DDP_MPI_CHECK(MPI_Allgather(&rank_, 1, MPI_INT, here.data(), 1, MPI_INT, node_));
  int blocks = here.front() % nodeSize_ == 0 ? 1 : 0;
  for (std::size_t i = 0; i < here.size(); ++i)
    blocks = here[i] == here.front() + static_cast<int>(i) ? blocks : 0;
  DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &blocks, 1, MPI_INT, MPI_MIN, comm_));
  nodeBlocks_ = blocks == 1;
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && acrossNodes_ != MPI_COMM_NULL) MPI_Comm_free(&acrossNodes_);
  if (!finalized && node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

WorkPtr MpiCommunicator::enqueue(const std::string& what, std::function<void(Work&)> run) {
  auto work = newWork<Work>(what, "");
  if (hold_.count() > 0) {
    run = [hold = std::exchange(hold_, {}), run = std::move(run)](Work& held) {
      std::this_thread::sleep_for(hold);
      run(held);
    };
  }
  {
    std::lock_guard lock(mutex_);
    DDP_CHECK(!stopping_, "collective issued on a communicator being destroyed");
    queue_.push_back(Task{work, std::move(run)});
  }
  wake_.notify_one();
  return work;
}

void MpiCommunicator::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything issued has run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task.work->markStarted();
      task.run(*task.work);
      task.work->complete();
    } catch (...) {
      task.work->complete(std::current_exception());
    }
  }
}

WorkPtr MpiCommunicator::allreduce(const void* send, void* data, std::size_t count, DataType type,
                                   ReduceOp op) {
  return allreduce(send, data, count, type, op, Rounding::kNone);
}

WorkPtr MpiCommunicator::allreduce(const void* send, void* data, std::size_t count, DataType type,
                                   ReduceOp op, Rounding rounding) {
  checkReduction("allreduce", type, op);
  const std::uint64_t sequence = nextSequence();
  const bool viaBFloat16 = rounding == Rounding::kBFloat16;
  return enqueue(
      str("allreduce(", dataTypeName(type), " x ", count, viaBFloat16 ? " via bfloat16" : "", ", ",
          reduceOpName(op), ")"),
      [=, this](Work& work) {
        if (auto region = findRegion(data, count * sizeOf(type))) {
          if (send != data) std::memcpy(data, send, count * sizeOf(type));
          work.setResultChecks(
              singleNode_
                  // Note [Node shared-memory all-reduce]: it reduces in place;
                  // Note [bf16 rounding inside the reduction].
                  ? region->allreduce(data, count, type, op, sequence, options().timeout,
                                      options().sumOfSquares, rounding)
                  : allreduceInTwoLevels(*region, data, count, type, op, sequence, rounding));
          return;
        }
        allreducePlain(comm_, send, data, count, type, op, rounding);
        work.setResultChecks(measure(data, count, type));
      });
}

ResultChecks MpiCommunicator::allreduceInTwoLevels(SharedRegion& region, void* data,
                                                   std::size_t count, DataType type, ReduceOp op,
                                                   std::uint64_t sequence, Rounding rounding) {
  // Note [Two-level all-reduce across nodes].
  char* bytes = static_cast<char*>(data);
  const std::size_t element = sizeOf(type);
  return region.allreduceAcrossNodes(data, count, type, op, sequence, options().timeout, rounding,
                                     [&](std::size_t begin, std::size_t end) {
                                       char* chunk = bytes + begin * element;
                                       allreducePlain(acrossNodes_, chunk, chunk, end - begin, type,
                                                      op, rounding);
                                       return measure(chunk, end - begin, type,
                                                      /*nonFiniteAlways=*/true);
                                     });
}

void MpiCommunicator::allreducePlain(MPI_Comm comm, const void* send, void* data, std::size_t count,
                                     DataType type, ReduceOp op, Rounding rounding) {
  // Note [Plain collectives in pieces].
  if (rounding == Rounding::kBFloat16) {
    // Note [bf16 rounding between nodes]: the staged path, a piece at a time.
    float* values = static_cast<float*>(data);
    auto* wire = reinterpret_cast<std::uint16_t*>(pieceBuffer(0));
    for (std::size_t at = 0; at < count; at += kBFloat16PieceCount) {
      const std::size_t length = std::min(kBFloat16PieceCount, count - at);
      toBFloat16(values + at, wire, length);
      DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, wire, static_cast<int>(length),
                                  mpiType(DataType::kBFloat16), bfloat16SumOp(), comm));
      if (op == ReduceOp::kAvg) divideBy(size_, wire, length, DataType::kBFloat16);
      fromBFloat16(wire, values + at, length);
    }
    return;
  }
  const MPI_Op mpiReduce = type == DataType::kBFloat16 ? bfloat16SumOp() : mpiOp(op);
  const std::size_t element = sizeOf(type);
  const std::size_t piece = kPlainPieceBytes / element;
  for (std::size_t at = 0; at < count; at += piece) {
    const int length = static_cast<int>(std::min(piece, count - at));
    char* target = static_cast<char*>(data) + at * element;
    DDP_MPI_CHECK(
        MPI_Allreduce(send == data ? MPI_IN_PLACE : static_cast<const char*>(send) + at * element,
                      target, length, mpiType(type), mpiReduce, comm));
  }
  if (op == ReduceOp::kAvg) divideBy(size_, data, count, type);
}

ResultChecks MpiCommunicator::measure(const void* data, std::size_t count, DataType type,
                                      bool nonFiniteAlways) const {
  // Notes [Non-finite check while reducing] and [Sum of squares while
  // reducing]: off the training thread, where asked for.
  ResultChecks checks;
  if (options().sumOfSquares && type == DataType::kFloat32)
    checks.sumOfSquares = sumOfSquares(static_cast<const float*>(data), count);
  if (nonFiniteAlways || (options().checkNonFinite && type != DataType::kBFloat16))
    checks.nonFinite = nonFiniteIn(data, count, type);
  return checks;
}

WorkPtr MpiCommunicator::reduceScatter(void* data, std::span<const std::size_t> bounds,
                                       DataType type, ReduceOp op) {
  return reduceScatter(data, bounds, type, op, Rounding::kNone);
}

char* MpiCommunicator::pieceBuffer(std::size_t which) {
  // A stripe of each of the ranks' parts (Note [Plain reduce-scatter in
  // stripes]) is at most one element over its share of the piece; 16 bytes
  // keep every element type aligned.
  std::unique_ptr<std::max_align_t[]>& buffer = pieceBuffers_.at(which);
  if (!buffer) {
    const std::size_t bytes = kPlainPieceBytes + static_cast<std::size_t>(size_) * 16;
    buffer = std::make_unique<std::max_align_t[]>((bytes + sizeof(std::max_align_t) - 1) /
                                                  sizeof(std::max_align_t));
  }
  return reinterpret_cast<char*>(buffer.get());
}

WorkPtr MpiCommunicator::allreduceViaBFloat16(float* data, std::size_t count, ReduceOp op) {
  checkReduction("allreduceViaBFloat16", DataType::kBFloat16, op);
  return allreduce(data, data, count, DataType::kFloat32, op, Rounding::kBFloat16);
}

WorkPtr MpiCommunicator::reduceScatterViaBFloat16(float* data, std::span<const std::size_t> bounds,
                                                  ReduceOp op) {
  checkReduction("reduceScatterViaBFloat16", DataType::kBFloat16, op);
  return reduceScatter(data, bounds, DataType::kFloat32, op, Rounding::kBFloat16);
}

WorkPtr MpiCommunicator::reduceScatter(void* data, std::span<const std::size_t> bounds,
                                       DataType type, ReduceOp op, Rounding rounding) {
  checkScatterBounds(bounds, size_);
  checkReduction("reduceScatter", type, op);
  const std::size_t count = bounds.back();
  std::vector<std::size_t> parts(bounds.begin(), bounds.end());
  const std::uint64_t sequence = nextSequence();
  const bool viaBFloat16 = rounding == Rounding::kBFloat16;
  return enqueue(
      str("reduce_scatter(", dataTypeName(type), " x ", count, viaBFloat16 ? " via bfloat16" : "",
          ", ", reduceOpName(op), ")"),
      [=, this, parts = std::move(parts)](Work& work) {
        if (auto region = findRegion(data, count * sizeOf(type))) {
          // Note [Node shared-memory reduce-scatter]: in place, measured while
          // reducing; Note [bf16 rounding inside the reduction]. Across
          // nodes, Note [Two-level reduce-scatter across nodes], or where the
          // nodes' ranks are not consecutive the two-level all-reduce, whose
          // result holds every part.
          work.setResultChecks(
              singleNode_
                  ? region->reduceScatter(data, parts, type, op, sequence, options().timeout,
                                          options().sumOfSquares, rounding)
              : nodeBlocks_
                  ? reduceScatterInTwoLevels(*region, data, parts, type, op, sequence, rounding)
                  : allreduceInTwoLevels(*region, data, count, type, op, sequence, rounding));
          return;
        }
        reduceScatterPlain(comm_, rank_, data, parts, type, op, rounding);
        // Each rank measures its part; the ranks add their parts' answers.
        const auto r = static_cast<std::size_t>(rank_);
        const ResultChecks part = measure(static_cast<char*>(data) + parts[r] * sizeOf(type),
                                          parts[r + 1] - parts[r], type);
        if (part.nonFinite || part.sumOfSquares) work.setResultChecks(addOverRanks(comm_, part));
      });
}

void MpiCommunicator::reduceScatterPlain(MPI_Comm comm, int me, void* data,
                                         std::span<const std::size_t> parts, DataType type,
                                         ReduceOp op, Rounding rounding) {
  const auto r = static_cast<std::size_t>(me);
  const std::size_t ranks = parts.size() - 1;
  const bool viaBFloat16 = rounding == Rounding::kBFloat16;
  // What crosses MPI: bfloat16 via bfloat16 (Note [bf16 rounding between nodes]).
  const DataType wire = viaBFloat16 ? DataType::kBFloat16 : type;
  const std::size_t element = sizeOf(type), wireElement = sizeOf(wire);
  const MPI_Op mpiReduce = wire == DataType::kBFloat16 ? bfloat16SumOp() : mpiOp(op);
  char* bytes = static_cast<char*>(data);
  // Note [Plain reduce-scatter in stripes]: call j reduces stripe j of every
  // rank's part, packed in rank order.
  const Stripes stripes(parts, kPlainPieceBytes / wireElement);
  std::vector<int>& counts = pieceCounts_;
  counts.resize(ranks);
  for (std::size_t j = 0; j < stripes.count(); ++j) {
    for (std::size_t q = 0; q < ranks; ++q)
      counts[q] = static_cast<int>(stripes.length(q, j));
    // The stripes, packed: narrowed into the piece buffer via bfloat16,
    // copied into it when there are several, else where they are.
    char* call = bytes;
    if (viaBFloat16 || stripes.count() > 1) {
      call = pieceBuffer(0);
      char* to = call;
      for (std::size_t q = 0; q < ranks; ++q) {
        const char* from = bytes + stripes.begin(q, j) * element;
        if (viaBFloat16) {
          toBFloat16(reinterpret_cast<const float*>(from), reinterpret_cast<std::uint16_t*>(to),
                     stripes.length(q, j));
        } else {
          std::memcpy(to, from, stripes.length(q, j) * element);
        }
        to += stripes.length(q, j) * wireElement;
      }
    }
    char* result = call;  // this rank's stripe, reduced
    if (std::find(counts.begin(), counts.end(), 0) == counts.end()) {
      DDP_MPI_CHECK(
          MPI_Reduce_scatter(MPI_IN_PLACE, call, counts.data(), mpiType(wire), mpiReduce, comm));
    } else {
      result = pieceBuffer(1);
      char* at = call;
      for (std::size_t q = 0; q < ranks; ++q) {
        if (counts[q] != 0) {
          DDP_MPI_CHECK(MPI_Reduce(at, q == r ? result : nullptr, counts[q], mpiType(wire),
                                   mpiReduce, static_cast<int>(q), comm));
        }
        at += stripes.length(q, j) * wireElement;
      }
    }
    const std::size_t own = stripes.begin(r, j), ownCount = stripes.length(r, j);
    if (viaBFloat16) {
      auto* rounded = reinterpret_cast<std::uint16_t*>(result);
      if (op == ReduceOp::kAvg) divideBy(size_, rounded, ownCount, DataType::kBFloat16);
      fromBFloat16(rounded, static_cast<float*>(data) + own, ownCount);
    } else if (result != bytes + own * element) {
      std::memmove(bytes + own * element, result, ownCount * element);
    }
  }
  if (op == ReduceOp::kAvg && !viaBFloat16) {
    divideBy(size_, bytes + parts[r] * element, parts[r + 1] - parts[r], type);
  }
}

ResultChecks MpiCommunicator::reduceScatterInTwoLevels(SharedRegion& region, void* data,
                                                       std::span<const std::size_t> bounds,
                                                       DataType type, ReduceOp op,
                                                       std::uint64_t sequence, Rounding rounding) {
  // Note [Two-level reduce-scatter across nodes].
  char* bytes = static_cast<char*>(data);
  const std::size_t element = sizeOf(type);
  const auto nodes = static_cast<std::size_t>(size_ / nodeSize_);
  const auto node = static_cast<std::size_t>(rank_ / nodeSize_);
  const auto perNode = static_cast<std::size_t>(nodeSize_);
  const auto q = static_cast<std::size_t>(rank_);
  const ResultChecks here = region.reduceScatterAcrossNodes(
      data, bounds, bounds[q], bounds[q + 1], type, op, sequence, options().timeout, rounding,
      [&](std::size_t begin, std::size_t end) {
        // Node n's ranks own elements [bounds[n L], bounds[(n + 1) L]): cut to this chunk.
        std::vector<std::size_t>& cuts = nodeCuts_;
        cuts.resize(nodes + 1);
        for (std::size_t n = 0; n <= nodes; ++n)
          cuts[n] = std::clamp(bounds[n * perNode], begin, end) - begin;
        reduceScatterPlain(acrossNodes_, static_cast<int>(node), bytes + begin * element, cuts,
                           type, op, rounding);
        const char* final = bytes + (begin + cuts[node]) * element;
        const std::size_t length = cuts[node + 1] - cuts[node];
        return measure(final, length, type, /*nonFiniteAlways=*/true);
      });
  return addOverRanks(acrossNodes_, here);  // the nodes' checks, in node order
}

ResultChecks MpiCommunicator::addOverRanks(MPI_Comm comm, const ResultChecks& mine) {
  int ranks = 1;
  DDP_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  double measured[2] = {mine.nonFinite.value_or(false) ? 1.0 : 0.0, mine.sumOfSquares.value_or(0)};
  std::vector<double>& all = partChecks_;  // sized for this communicator's ranks, the most
  DDP_MPI_CHECK(MPI_Allgather(measured, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, comm));
  bool nonFinite = false;
  double total = 0.0;
  for (std::size_t q = 0; q < static_cast<std::size_t>(ranks); ++q) {  // in rank order: same bits
    nonFinite = nonFinite || all[2 * q] != 0.0;
    total += all[2 * q + 1];
  }
  ResultChecks checks;
  if (mine.nonFinite) checks.nonFinite = nonFinite;
  if (mine.sumOfSquares) checks.sumOfSquares = total;
  return checks;
}

WorkPtr MpiCommunicator::broadcast(void* data, std::size_t count, DataType type, int root) {
  const int n = mpiCount(count);
  return enqueue(
      str("broadcast(", dataTypeName(type), " x ", count, ", root ", root, ")"),
      [=, this](Work&) { DDP_MPI_CHECK(MPI_Bcast(data, n, mpiType(type), root, comm_)); });
}

WorkPtr MpiCommunicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  const int n = mpiCount(count);
  const std::size_t bytes = count * sizeOf(type);
  char* mine = static_cast<char*>(recv) + static_cast<std::size_t>(rank_) * bytes;
  const bool inPlace = send == mine;
  const std::uint64_t sequence = nextSequence();
  return enqueue(str("allgather(", dataTypeName(type), " x ", count, ")"), [=, this](Work&) {
    if (auto region =
            singleNode_ ? findRegion(recv, bytes * static_cast<std::size_t>(size_)) : nullptr) {
      // Note [Node shared-memory all-gather]: it gathers in place.
      if (!inPlace) std::memcpy(mine, send, bytes);
      region->allgather(recv, count, type, sequence, options().timeout);
      return;
    }
    if (bytes <= kPlainPieceBytes) {
      DDP_MPI_CHECK(MPI_Allgather(inPlace ? MPI_IN_PLACE : send, n, mpiType(type), recv, n,
                                  mpiType(type), comm_));
      return;
    }
    // Note [Plain collectives in pieces]: piece j of every rank's part, each
    // landing at its place in the rank's part (MPI_Allgatherv's displacements).
    if (!inPlace) std::memcpy(mine, send, bytes);
    const std::size_t piece = kPlainPieceBytes / sizeOf(type);
    std::vector<int>&counts = pieceCounts_, &at = pieceDisplacements_;
    counts.resize(static_cast<std::size_t>(size_));
    for (std::size_t begin = 0; begin < count; begin += piece) {
      for (std::size_t q = 0; q < counts.size(); ++q) {
        counts[q] = static_cast<int>(std::min(piece, count - begin));
        at[q] = mpiCount(q * count + begin);
      }
      DDP_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts.data(),
                                   at.data(), mpiType(type), comm_));
    }
  });
}

WorkPtr MpiCommunicator::gather(const void* send, void* recv, std::size_t count, DataType type,
                                int root) {
  const int n = mpiCount(count);
  return enqueue(
      str("gather(", dataTypeName(type), " x ", count, ", root ", root, ")"), [=, this](Work&) {
        DDP_MPI_CHECK(MPI_Gather(send, n, mpiType(type), recv, n, mpiType(type), root, comm_));
      });
}

std::shared_ptr<SharedRegion> MpiCommunicator::findRegion(const void* data,
                                                          std::size_t bytes) const {
  std::lock_guard lock(regionsMutex_);
  std::shared_ptr<SharedRegion> found;
  std::erase_if(regions_, [&](const std::weak_ptr<SharedRegion>& weak) {
    auto region = weak.lock();
    if (region && !found && region->contains(data, bytes)) found = region;
    return !region;
  });
  return found;
}

std::shared_ptr<void> MpiCommunicator::allocate(std::size_t bytes) {
  std::shared_ptr<void> memory;
  // On the communication thread, like every collective, so it is ordered with them.
  enqueue(str("allocate(", bytes, " bytes)"), [&, this](Work&) {
    if ((singleNode_ && size_ > 1) || twoLevel()) {
      std::shared_ptr<SharedRegion> region;
      std::string failure;
      try {
        region = std::make_shared<SharedRegion>(node_, bytes);
      } catch (const CommError& e) {
        failure = e.what();  // the same on every rank of this node (SharedRegion agrees on it)
      }
      // Across nodes, one node without the region puts every rank on plain MPI.
      int ok = region ? 1 : 0;
      if (!singleNode_) DDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm_));
      if (ok == 1) {
        std::lock_guard lock(regionsMutex_);
        regions_.push_back(region);
        memory = std::shared_ptr<void>(region, region->data());
        return;
      }
      if (!failure.empty() && nodeRank_ == 0)
        log::warn(str(failure, "; all-reduces use plain MPI instead"));
    }
    memory = allocateZeroedHost(bytes);
  })->wait(options().timeout);
  return memory;
}

WorkPtr MpiCommunicator::barrier() {
  return enqueue("barrier", [this](Work&) { DDP_MPI_CHECK(MPI_Barrier(comm_)); });
}

}  // namespace ddp::comm
