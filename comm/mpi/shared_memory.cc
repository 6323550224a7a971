#include "comm/mpi/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <type_traits>

#include "comm/bfloat16.h"
#include "comm/finite.h"
#include "runtime/cpu_dispatch.h"
#include "runtime/error.h"
#include "runtime/file_system.h"
#include "runtime/log.h"
#include "runtime/mpi_check.h"

namespace ddp::comm {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kChunkAlign = 64;  // chunks start on their own cache line
constexpr std::size_t kBlock = 4096;     // elements summed per pass, kept in L1
// Control::op of an all-gather: no ReduceOp has this value.
constexpr std::uint32_t kAllgatherOp = 0xFFFFFFFF;
// Set in Control::op of a reduce-scatter (beside its ReduceOp).
constexpr std::uint32_t kReduceScatterFlag = 0x100;
// Set in Control::op of a reduction that rounds to bfloat16 (Rounding::kBFloat16).
constexpr std::uint32_t kBFloat16RoundingFlag = 0x200;
// Set in Control::op of a two-level all-reduce (beside its ReduceOp).
constexpr std::uint32_t kTwoLevelFlag = 0x400;

std::size_t roundUp(std::size_t value, std::size_t to) {
  return (value + to - 1) / to * to;
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
    default:
      return a + b;
  }
}

// Stores result[0, length) (elements [block, block + length) of the
// collective) where it belongs: into every rank's buffer (`bounds` null, an
// all-reduce), or into the buffer of the rank whose part holds each element
// (`bounds`: the reduce-scatter's, one more than the ranks).
template <class T>
void store(const T* result, std::size_t block, std::size_t length, const std::vector<T*>& buffers,
           const std::size_t* bounds) {
  if (bounds == nullptr) {
    for (T* destination : buffers)
      std::copy(result, result + length, destination + block);
    return;
  }
  const std::size_t end = block + length;
  for (std::size_t q = 0; q < buffers.size(); ++q) {
    const std::size_t from = std::max(block, bounds[q]), to = std::min(end, bounds[q + 1]);
    if (from < to) std::copy(result + (from - block), result + (to - block), buffers[q] + from);
  }
}

// op(buffers[0][i], ..., buffers[n-1][i]) for every i in [begin, end),
// summed in rank order, stored as store() says. Each block is reduced into a
// scratch block (the buffers are both sources and destinations) small enough
// that the passes over it stay in L1, then stored.
// Returns whether the stored result holds a NaN or an infinity (floating
// types; checked while each block is in L1: Note [Non-finite check while
// reducing] in comm/finite.h); `squares` (float32 only; may be null): the
// sum of the squares of the result's blocks is added to it, block by block
// (Note [Sum of squares while reducing]).
template <class T>
bool reduceChunk(const std::vector<T*>& buffers, std::size_t begin, std::size_t end, ReduceOp op,
                 int world, double* squares, const std::size_t* bounds) {
  bool nonFinite = false;
  const std::vector<T*>& sources = buffers;
  static thread_local std::vector<T> scratch(kBlock);
  T* acc = scratch.data();
  const bool add = op == ReduceOp::kSum || op == ReduceOp::kAvg;
  for (std::size_t block = begin; block < end; block += kBlock) {
    const std::size_t length = std::min(end, block + kBlock) - block;
    std::copy(sources[0] + block, sources[0] + block + length, acc);
    for (std::size_t s = 1; s < sources.size(); ++s) {
      const T* c = sources[s] + block;
      if (add) {
        for (std::size_t i = 0; i < length; ++i)
          acc[i] += c[i];
      } else {
        for (std::size_t i = 0; i < length; ++i)
          acc[i] = combine(acc[i], c[i], op);
      }
    }
    if (op == ReduceOp::kAvg) {
      const T scale = static_cast<T>(1.0 / world);
      for (std::size_t i = 0; i < length; ++i)
        acc[i] *= scale;
    }
    if constexpr (std::is_floating_point_v<T>) nonFinite = nonFinite || anyNonFinite(acc, length);
    if constexpr (std::is_same_v<T, float>) {
      if (squares != nullptr) *squares += sumOfSquares(acc, length);
    }
    store(acc, block, length, buffers, bounds);
  }
  return nonFinite;
}

// The bfloat16 version: sources are converted and summed in float32 (the
// scratch block), and only the stored result is rounded to bfloat16. Returns
// whether the stored result holds a NaN or an infinity (checked after
// rounding, so a sum that rounds up to infinity counts).
DDP_ALSO_FOR_AVX2 bool reduceChunkBFloat16(const std::vector<std::uint16_t*>& buffers,
                                           std::size_t begin, std::size_t end, ReduceOp op,
                                           int world, const std::size_t* bounds) {
  bool nonFinite = false;
  static thread_local std::vector<float> scratch(kBlock);
  static thread_local std::vector<std::uint16_t> rounded(kBlock);
  float* acc = scratch.data();
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world) : 1.0f;
  for (std::size_t block = begin; block < end; block += kBlock) {
    const std::size_t length = std::min(end, block + kBlock) - block;
    fromBFloat16(buffers[0] + block, acc, length);
    for (std::size_t s = 1; s < buffers.size(); ++s) {
      const std::uint16_t* c = buffers[s] + block;
      for (std::size_t i = 0; i < length; ++i)
        acc[i] += fromBFloat16(c[i]);
    }
    for (std::size_t i = 0; i < length; ++i)
      acc[i] *= scale;
    toBFloat16(acc, rounded.data(), length);
    nonFinite = nonFinite || anyNonFiniteBFloat16(rounded.data(), length);
    store(rounded.data(), block, length, buffers, bounds);
  }
  return nonFinite;
}

// Note [bf16 rounding inside the reduction] (comm/communicator.h): float32
// sources, each value rounded to bfloat16 as it is read, summed in float32 in
// rank order, scaled, and the result rounded again and stored as float32.
// reduceChunkBFloat16's operations in its order, on the staged bfloat16
// copies: the same bits. Returns whether the stored result holds a NaN or an
// infinity; `squares` (may be null) gets the sum of its squares added.
DDP_ALSO_FOR_AVX2 bool reduceChunkViaBFloat16(const std::vector<float*>& buffers, std::size_t begin,
                                              std::size_t end, ReduceOp op, int world,
                                              double* squares, const std::size_t* bounds) {
  bool nonFinite = false;
  static thread_local std::vector<float> scratch(kBlock);
  float* acc = scratch.data();
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world) : 1.0f;
  for (std::size_t block = begin; block < end; block += kBlock) {
    const std::size_t length = std::min(end, block + kBlock) - block;
    const float* first = buffers[0] + block;
    for (std::size_t i = 0; i < length; ++i)
      acc[i] = roundedToBFloat16(first[i]);
    for (std::size_t s = 1; s < buffers.size(); ++s) {
      const float* c = buffers[s] + block;
      for (std::size_t i = 0; i < length; ++i)
        acc[i] += roundedToBFloat16(c[i]);
    }
    for (std::size_t i = 0; i < length; ++i)
      acc[i] = roundedToBFloat16(acc[i] * scale);
    nonFinite = nonFinite || anyNonFinite(acc, length);
    if (squares != nullptr) *squares += sumOfSquares(acc, length);
    store(acc, block, length, buffers, bounds);
  }
  return nonFinite;
}

// FNV-1a over a reduce-scatter's parts (0: an all-reduce, no parts).
std::uint64_t hashBounds(std::span<const std::size_t> bounds) {
  if (bounds.empty()) return 0;
  std::uint64_t hash = 1469598103934665603ull;
  for (std::size_t bound : bounds)
    hash = (hash ^ bound) * 1099511628211ull;
  return hash;
}

// Throws InternalError unless `rounding` suits the reduction: Rounding::kBFloat16
// is for float32 sums and averages only.
void checkRounding(Rounding rounding, DataType type, ReduceOp op) {
  DDP_CHECK(rounding != Rounding::kBFloat16 ||
                (type == DataType::kFloat32 && (op == ReduceOp::kSum || op == ReduceOp::kAvg)),
            "shared-memory reduction via bfloat16: float32 sums and averages only");
}

// The elements each node rank reduces (the last rank's chunk may be shorter
// or empty): an equal share of `count`, rounded up to whole cache lines.
std::size_t chunkLength(std::size_t count, std::size_t element, int ranks) {
  const auto n = static_cast<std::size_t>(ranks);
  return roundUp((count + n - 1) / n, kChunkAlign / element);
}

// Reduces elements [begin, end) of the collective at `offset` in every
// segment and stores them as store() says, with the reduceChunk* that fits
// `type` and rounding. Returns whether the stored result holds a NaN or an
// infinity; `squares` (float32, may be null) gets the sum of its squares added.
bool reduceRange(const std::vector<void*>& segments, std::size_t offset, std::size_t begin,
                 std::size_t end, DataType type, ReduceOp op, int world, double* squares,
                 const std::size_t* bounds, bool viaBFloat16) {
  // Every node rank's segment at this collective's offset, typed.
  const auto buffersOf = [&]<class T>(T*) {
    std::vector<T*> buffers;
    for (void* segment : segments)
      buffers.push_back(reinterpret_cast<T*>(static_cast<char*>(segment) + offset));
    return buffers;
  };
  const auto run = [&]<class T>(T* tag) {
    return reduceChunk<T>(buffersOf(tag), begin, end, op, world, squares, bounds);
  };
  switch (type) {
    case DataType::kFloat32:
      if (viaBFloat16) {
        return reduceChunkViaBFloat16(buffersOf(static_cast<float*>(nullptr)), begin, end, op,
                                      world, squares, bounds);
      }
      return run(static_cast<float*>(nullptr));
    case DataType::kFloat64:
      return run(static_cast<double*>(nullptr));
    case DataType::kInt32:
      return run(static_cast<std::int32_t*>(nullptr));
    case DataType::kInt64:
      return run(static_cast<std::int64_t*>(nullptr));
    case DataType::kUInt8:
      return run(static_cast<std::uint8_t*>(nullptr));
    case DataType::kBFloat16:
      return reduceChunkBFloat16(buffersOf(static_cast<std::uint16_t*>(nullptr)), begin, end, op,
                                 world, bounds);
  }
  throw InternalError("unknown DataType");
}

}  // namespace

struct SharedRegion::Control {
  std::uint64_t sequence;
  std::uint64_t offset;
  std::uint64_t count;
  std::uint32_t type;
  std::uint32_t op;
  // Whether this rank's chunk of the result is not finite. Written after the
  // arrival barrier, read after the next barrier (the completion barrier; a
  // two-level all-reduce's gathering barrier): a rank that runs ahead into
  // the next all-reduce cannot overwrite it before every rank has passed
  // that next arrival barrier. The same for the sum of squares.
  std::uint32_t nonFinite;
  std::uint32_t squaresAsked;  // the allreduce's sumOfSquares: compared like op
  double sumOfSquares;
  std::uint64_t boundsHash;        // a reduce-scatter's parts (0 otherwise): compared like op
  char padding[kChunkAlign - 56];  // one cache line per rank: no false sharing
};

SharedRegion::SharedRegion(MPI_Comm node, std::size_t bytes) : bytes_(bytes) {
  static_assert(sizeof(Control) == kChunkAlign);
  DDP_MPI_CHECK(MPI_Comm_rank(node, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(node, &size_));
  const std::size_t segment = roundUp(std::max<std::size_t>(bytes, 1), kPage);
  const std::size_t controls = sizeof(Control) * static_cast<std::size_t>(size_);
  const std::size_t header = roundUp(controls + sizeof(NodeBarrierState), kPage);
  mappingBytes_ = header + segment * static_cast<std::size_t>(size_);

  // Local rank 0 creates the object; the name is unique per node and call.
  static std::atomic<std::uint64_t> counter{0};
  char name[64] = {};
  if (rank_ == 0) {
    std::snprintf(name, sizeof name, "/ddp-%d-%llu", static_cast<int>(getpid()),
                  static_cast<unsigned long long>(counter++));
  }
  DDP_MPI_CHECK(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, node));
  int fd = -1;
  int error = 0;
  std::uint64_t shmFree = 0;
  if (rank_ == 0) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(mappingBytes_)) != 0) error = errno;
    // The pages now, not at first touch: a /dev/shm too small for them (a
    // container's 64 MiB) would otherwise end the ranks with SIGBUS mid-step.
    if (error == 0) error = posix_fallocate(fd, 0, static_cast<off_t>(mappingBytes_));
    if (error != 0 && fd >= 0) shmFree = freeBytesOf(fd).value_or(0);
  }
  DDP_MPI_CHECK(MPI_Bcast(&error, 1, MPI_INT, 0, node));
  if (error == 0 && rank_ != 0) {
    fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) error = errno;
  }
  if (error == 0) {
    mapping_ = mmap(nullptr, mappingBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping_ == MAP_FAILED) {
      mapping_ = nullptr;
      error = errno;
    }
  }
  if (fd >= 0) close(fd);
  // The barrier's state is constructed once, by local rank 0, before the
  // agreement below: no rank can use it before then, and a rank that
  // constructed it later would reset a barrier its peers already entered.
  if (rank_ == 0 && error == 0) new (static_cast<char*>(mapping_) + controls) NodeBarrierState;
  int anyError = error;
  DDP_MPI_CHECK(MPI_Allreduce(&error, &anyError, 1, MPI_INT, MPI_MAX, node));
  if (rank_ == 0) shm_unlink(name);  // everyone has mapped it (or failed): no file left behind
  if (anyError != 0) {
    if (mapping_ != nullptr) munmap(mapping_, mappingBytes_);
    mapping_ = nullptr;
    throw CommError(
        str("cannot share ", bytesString(static_cast<double>(mappingBytes_)),
            " of memory between the ranks of this node (", name, "): ", std::strerror(anyError),
            shmFree > 0 ? str(" (/dev/shm has ", bytesString(static_cast<double>(shmFree)),
                              " free; a larger /dev/shm, e.g. docker run --shm-size, "
                              "gives the faster path)")
                        : std::string(" (is /dev/shm too small?)")));
  }
  auto* base = static_cast<char*>(mapping_);
  barrier_ = NodeBarrier(std::launder(reinterpret_cast<NodeBarrierState*>(base + controls)), size_);
  for (int r = 0; r < size_; ++r)
    segments_.push_back(base + header + segment * static_cast<std::size_t>(r));
}

SharedRegion::~SharedRegion() {
  if (mapping_ != nullptr) munmap(mapping_, mappingBytes_);
}

std::size_t SharedRegion::offsetOf(const void* data) const {
  return static_cast<std::size_t>(static_cast<const char*>(data) -
                                  static_cast<const char*>(this->data()));
}

SharedRegion::Control& SharedRegion::control(int rank) const {
  return static_cast<Control*>(mapping_)[rank];
}

bool SharedRegion::contains(const void* begin, std::size_t length) const {
  const auto* p = static_cast<const char*>(begin);
  const auto* mine = static_cast<const char*>(data());
  return p >= mine && p + length <= mine + bytes_;
}

void SharedRegion::arrive(std::size_t offset, std::size_t count, DataType type, std::uint32_t op,
                          bool sumOfSquares, std::uint64_t boundsHash, std::uint64_t sequence,
                          std::chrono::milliseconds timeout) {
  const bool gather = op == kAllgatherOp, scatter = !gather && (op & kReduceScatterFlag) != 0u;
  const bool twoLevel = !gather && (op & kTwoLevelFlag) != 0u;
  const char* name = gather                ? "all-gather"
                     : twoLevel && scatter ? "two-level reduce-scatter"
                     : twoLevel            ? "two-level all-reduce"
                     : scatter             ? "reduce-scatter"
                                           : "all-reduce";
  Control& mine = control(rank_);
  mine.sequence = sequence;
  mine.offset = offset;
  mine.count = count;
  mine.type = static_cast<std::uint32_t>(type);
  mine.op = op;
  mine.squaresAsked = sumOfSquares ? 1 : 0;
  mine.boundsHash = boundsHash;
  // Every rank's data and control slot are written.
  barrier_.wait(timeout, gather                ? "shared-memory all-gather, arrival"
                         : twoLevel && scatter ? "two-level reduce-scatter, arrival"
                         : twoLevel            ? "two-level all-reduce, arrival"
                         : scatter             ? "shared-memory reduce-scatter, arrival"
                                               : "shared-memory all-reduce, arrival");
  for (int r = 0; r < size_; ++r) {
    const Control& other = control(r);
    if (other.sequence != sequence || other.offset != offset || other.count != count ||
        other.type != mine.type || other.op != mine.op || other.squaresAsked != mine.squaresAsked ||
        other.boundsHash != mine.boundsHash) {
      barrier_.wait(timeout, "shared-memory collective, mismatch");  // keep barrier counts equal
      throw MismatchError(str(
          "ranks disagree on a shared-memory ", name, ": node rank ", rank_, " issued collective #",
          sequence, " on ", count, " x ", dataTypeName(type), " at offset ", offset, ", node rank ",
          r, " collective #", other.sequence, " on ", other.count, " elements at offset ",
          other.offset, other.boundsHash != mine.boundsHash ? " with other parts" : "",
          " (the ranks' programs have diverged)"));
    }
  }
}

ResultChecks SharedRegion::allreduce(void* data, std::size_t count, DataType type, ReduceOp op,
                                     std::uint64_t sequence, std::chrono::milliseconds timeout,
                                     bool sumOfSquares, Rounding rounding) {
  return reduce(data, count, nullptr, type, op, sequence, timeout, sumOfSquares, rounding);
}

// Note [Node shared-memory reduce-scatter].
ResultChecks SharedRegion::reduceScatter(void* data, std::span<const std::size_t> bounds,
                                         DataType type, ReduceOp op, std::uint64_t sequence,
                                         std::chrono::milliseconds timeout, bool sumOfSquares,
                                         Rounding rounding) {
  DDP_CHECK(bounds.size() == static_cast<std::size_t>(size_) + 1,
            "shared-memory reduce-scatter: one part per node rank (a one-node job)");
  return reduce(data, bounds.back(), bounds.data(), type, op, sequence, timeout, sumOfSquares,
                rounding);
}

ResultChecks SharedRegion::reduce(void* data, std::size_t count, const std::size_t* bounds,
                                  DataType type, ReduceOp op, std::uint64_t sequence,
                                  std::chrono::milliseconds timeout, bool sumOfSquares,
                                  Rounding rounding) {
  const bool viaBFloat16 = rounding == Rounding::kBFloat16;
  checkRounding(rounding, type, op);
  const std::size_t element = sizeOf(type);
  const std::size_t offset = offsetOf(data);
  Control& mine = control(rank_);
  const std::uint64_t boundsHash =
      bounds != nullptr ? hashBounds({bounds, static_cast<std::size_t>(size_) + 1}) : 0;
  const std::uint32_t mark = static_cast<std::uint32_t>(op) |
                             (bounds != nullptr ? kReduceScatterFlag : 0u) |
                             (viaBFloat16 ? kBFloat16RoundingFlag : 0u);
  arrive(offset, count, type, mark, sumOfSquares, boundsHash, sequence, timeout);

  // The chunks are the all-reduce's whether or not the result is scattered:
  // every element is summed by the same rank in the same order, so a
  // reduce-scatter's parts are the all-reduce's bits, and so are the checks.
  const std::size_t perRank = chunkLength(count, element, size_);
  const std::size_t begin = std::min(count, perRank * static_cast<std::size_t>(rank_));
  const std::size_t end = std::min(count, begin + perRank);
  const bool squares = sumOfSquares && type == DataType::kFloat32;
  double chunkSquares = 0.0;
  bool nonFinite = reduceRange(segments_, offset, begin, end, type, op, size_,
                               squares ? &chunkSquares : nullptr, bounds, viaBFloat16);
  mine.nonFinite = nonFinite ? 1 : 0;
  mine.sumOfSquares = chunkSquares;
  // Every chunk is reduced and stored where it belongs.
  barrier_.wait(timeout, bounds != nullptr ? "shared-memory reduce-scatter, completion"
                                           : "shared-memory all-reduce, completion");
  double total = 0.0;
  for (int r = 0; r < size_; ++r) {  // in rank order: the same bits on every rank
    nonFinite = nonFinite || control(r).nonFinite != 0;
    total += control(r).sumOfSquares;
  }
  ResultChecks result;
  if (type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kBFloat16)
    result.nonFinite = nonFinite;
  if (squares) result.sumOfSquares = total;
  return result;
}

std::pair<std::vector<std::size_t>, ResultChecks> SharedRegion::reduceOwnChunk(
    void* data, std::size_t count, std::span<const std::size_t> bounds, DataType type, ReduceOp op,
    std::uint64_t sequence, std::chrono::milliseconds timeout, Rounding rounding,
    const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes) {
  const bool viaBFloat16 = rounding == Rounding::kBFloat16;
  checkRounding(rounding, type, op);
  const std::size_t element = sizeOf(type);
  const std::size_t offset = offsetOf(data);
  const std::uint32_t mark = static_cast<std::uint32_t>(op) | kTwoLevelFlag |
                             (bounds.empty() ? 0u : kReduceScatterFlag) |
                             (viaBFloat16 ? kBFloat16RoundingFlag : 0u);
  arrive(offset, count, type, mark, false, hashBounds(bounds), sequence, timeout);
  // 1. This rank's chunk of the node's sum (an average's too: it is divided
  // once the nodes' sums are added), stored into this rank's buffer only.
  const std::size_t perRank = chunkLength(count, element, size_);
  std::vector<std::size_t> chunks(static_cast<std::size_t>(size_) + 1);
  for (std::size_t q = 0; q < chunks.size(); ++q)
    chunks[q] = std::min(count, perRank * q);
  const auto r = static_cast<std::size_t>(rank_);
  const ReduceOp nodeOp = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  reduceRange(segments_, offset, chunks[r], chunks[r + 1], type, nodeOp, size_, nullptr,
              chunks.data(), viaBFloat16);
  // 2. The chunk across the nodes. No other rank reads it until step 3.
  ResultChecks checks = acrossNodes(chunks[r], chunks[r + 1]);
  return {std::move(chunks), checks};
}

ResultChecks SharedRegion::gatherChecks(const ResultChecks& own, std::chrono::milliseconds timeout,
                                        const char* where) {
  Control& mine = control(rank_);
  mine.nonFinite = own.nonFinite.value_or(false) ? 1 : 0;
  mine.sumOfSquares = own.sumOfSquares.value_or(0.0);
  barrier_.wait(timeout, where);
  bool nonFinite = false;
  double total = 0.0;
  for (int q = 0; q < size_; ++q) {  // in rank order: the same bits on every rank
    nonFinite = nonFinite || control(q).nonFinite != 0;
    total += control(q).sumOfSquares;
  }
  ResultChecks result;
  if (own.nonFinite) result.nonFinite = nonFinite;
  if (own.sumOfSquares) result.sumOfSquares = total;
  return result;
}

void SharedRegion::copyFromOwners(std::size_t offset, std::size_t element,
                                  std::span<const std::size_t> chunks, std::size_t begin,
                                  std::size_t end) {
  for (std::size_t q = 0; q < segments_.size(); ++q) {
    const std::size_t from = std::max(begin, chunks[q]), to = std::min(end, chunks[q + 1]);
    if (q == static_cast<std::size_t>(rank_) || from >= to) continue;
    const std::size_t at = offset + from * element;
    std::memcpy(static_cast<char*>(this->data()) + at, static_cast<const char*>(segments_[q]) + at,
                (to - from) * element);
  }
}

// Note [Two-level all-reduce across nodes].
ResultChecks SharedRegion::allreduceAcrossNodes(
    void* data, std::size_t count, DataType type, ReduceOp op, std::uint64_t sequence,
    std::chrono::milliseconds timeout, Rounding rounding,
    const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes) {
  const auto [chunks, own] =
      reduceOwnChunk(data, count, {}, type, op, sequence, timeout, rounding, acrossNodes);
  // 3. Every chunk is final in its owner's buffer: copy the others'.
  const ResultChecks result = gatherChecks(own, timeout, "two-level all-reduce, gathering");
  copyFromOwners(offsetOf(data), sizeOf(type), chunks, 0, count);
  // 4. Nobody changes its chunk while the others copy it.
  barrier_.wait(timeout, "two-level all-reduce, completion");
  return result;
}

// Note [Two-level reduce-scatter across nodes].
ResultChecks SharedRegion::reduceScatterAcrossNodes(
    void* data, std::span<const std::size_t> bounds, std::size_t begin, std::size_t end,
    DataType type, ReduceOp op, std::uint64_t sequence, std::chrono::milliseconds timeout,
    Rounding rounding, const std::function<ResultChecks(std::size_t, std::size_t)>& acrossNodes) {
  const auto [chunks, own] = reduceOwnChunk(data, bounds.back(), bounds, type, op, sequence,
                                            timeout, rounding, acrossNodes);
  // 3. This rank's part is final in the buffers of the ranks whose chunks hold it.
  const ResultChecks result = gatherChecks(own, timeout, "two-level reduce-scatter, gathering");
  copyFromOwners(offsetOf(data), sizeOf(type), chunks, begin, end);
  // 4. Nobody changes its chunk while the others copy from it.
  barrier_.wait(timeout, "two-level reduce-scatter, completion");
  return result;
}

// Note [Node shared-memory all-gather].
void SharedRegion::allgather(void* data, std::size_t count, DataType type, std::uint64_t sequence,
                             std::chrono::milliseconds timeout) {
  const std::size_t bytes = count * sizeOf(type);
  const std::size_t offset = offsetOf(data);
  arrive(offset, count, type, kAllgatherOp, false, 0, sequence, timeout);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const std::size_t part = offset + static_cast<std::size_t>(q) * bytes;
    std::memcpy(static_cast<char*>(this->data()) + part,
                static_cast<const char*>(segments_[static_cast<std::size_t>(q)]) + part, bytes);
  }
  barrier_.wait(timeout, "shared-memory all-gather, completion");
}

}  // namespace ddp::comm
