// Reducer: bucketed gradient all-reduce that overlaps the backward pass.
//
// Any model that can say "this gradient is final" can use it: it knows
// gradients only as (name, element count), never the trainer's types.
//
// Note [Reducer state machine]
// Built once (collective): gradients are assigned to buckets in reverse
// registration order (the order backward produces them), the first bucket
// capped at options.firstBucketBytes and the rest at options.bucketCapBytes
// (a bucket closes once it reaches its cap, so a gradient larger than the cap
// gets a bucket of its own; a cap of 0 gives every gradient its own bucket;
// kSingleBucket puts every gradient in one bucket, the first-bucket cap
// included, so nothing overlaps backward).
// Every rank computes the layout from the same specs and checks that all
// ranks got the same one. Each bucket is one contiguous range of storage that
// the communicator allocated; gradient(i) is a view into it, so backward
// writes gradients in place and nothing is copied in or out. The storage
// holds the gradients in backward order whatever the caps; the caps only
// decide where buckets end. So setBucketCaps() can re-partition it between
// passes (--bucket-cap-mb auto tries caps that way) while every gradient
// view stays where it was.
// Per backward pass:
//   prepareForBackward(reduce)   every bucket pending, nothing launched
//   markReady(i) ...             gradient i is final; when it completes its
//                                bucket, that bucket's all-reduce is issued
//                                (asynchronously) if every earlier bucket
//                                has been issued too, so all ranks issue
//                                buckets in the same order
//   finalize()                   waits for every bucket; afterwards the
//                                gradients hold the mean over ranks and the
//                                optimizer may step
// With reduce = false (gradient accumulation, PyTorch's no_sync()) markReady
// and finalize do nothing: gradients only accumulate locally.
//
// Note [Reduce-scatter for a sharded optimizer]
// A sharded optimizer (trainer/sharded_optimizer.h) updates only its own
// part of the weights, so it needs only that part of the averaged gradient.
// With ReducerOptions::scatterBounds (one offset per rank and one past the
// end, in the storage's elements: rank r owns [bounds[r], bounds[r+1])) each
// bucket is reduce-scattered instead of all-reduced: rank r receives the
// mean of the bucket's elements that fall in its part, where they are, and
// the rest of its storage keeps unreduced values. On a ring that moves half
// the bytes of an all-reduce, so a sharded step (reduce-scatter, update,
// all-gather) communicates what an unsharded one does (Megatron-Core's
// distributed optimizer, PyTorch FSDP's SHARD_GRAD_OP); with the all-reduce
// it moved 1.5x. The buckets keep their caps and overlap backward as
// before: a bucket's part of rank r is its intersection with rank r's
// range, empty for most ranks when the bucket is small. The node
// shared-memory path reduces a bucket exactly as it all-reduces it (Note
// [Node shared-memory reduce-scatter]), so the owned elements hold the
// all-reduce's bits and the backend's checks still cover the whole bucket:
// firstNonFinite() and sumOfSquares() answer as in an all-reduce, the same
// on every rank. Where a backend did not check, each rank scans its part
// and the ranks combine their answers in rank order (a collective, on every
// rank alike). On GPUs (NCCL: one ncclReduce per non-empty part, grouped)
// the trainer does the same on the device, never waiting on the host: each
// rank flags a non-finite value in its part and the ranks all-reduce the
// flag with max; each rank sums the squares of its part and the ranks
// all-gather the sums, which every rank adds in rank order
// (trainer/trainer.cc, Trainer::Gpu). ncclReduce may add the ranks in
// another order than ncclAllReduce, and a norm summed by parts rounds
// otherwise than the whole gradient's, so on several GPUs a sharded run
// matches an unsharded one within float rounding, not bit for bit (in a
// world of one, bit for bit); every rank still gets the same bits.
//
// Threading: one thread (the training thread) calls everything. Frozen
// gradients (requiresGrad = false) are in no bucket and never communicated.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace ddp::comm {

struct GradientSpec {
  std::string name;          // for error messages ("layers.2.weight")
  std::size_t numel = 0;     // float32 elements
  bool requiresGrad = true;  // false: frozen, never reduced
};

// A bucket cap meaning "one bucket for everything" (no overlap).
inline constexpr std::size_t kSingleBucket = static_cast<std::size_t>(-1);

// Communication hook: what goes over the wire for each bucket.
//   kNone: the float32 gradients themselves.
//   kBf16: each bucket is rounded to bfloat16, reduced, and widened back:
//          half the bytes. On NCCL the Reducer stages it: kernels round the
//          bucket into a staging buffer (Communicator::narrowToBFloat16) and
//          widen the result. The MPI backend does it itself, with the same
//          bits and no staging here: in node shared memory, where no bytes
//          cross a wire, inside the reduction; between nodes on its
//          communication thread, a piece at a time (Notes [bf16 rounding
//          inside the reduction] in comm/communicator.h and [bf16 rounding
//          between nodes] in comm/mpi/mpi_communicator.h). On one node the sum is accumulated in
//          float32: each rank's values are rounded once (2^-8 relative) and
//          the mean once more, so an element of the mean is off by at most
//          about 2^-7 x (the largest |gradient| among the ranks) (tested in
//          tests/mpi/reducer_test.cc). Between nodes (MPI_Allreduce with a
//          user op that adds two values in float32 and rounds) and on NCCL
//          (as PyTorch's bf16_compress_hook) each addition's result is
//          rounded, world - 1 of them, so the error grows with the world
//          size there (in two levels, Note [Two-level all-reduce across
//          nodes], each node's sum is rounded once and the additions
//          between nodes each once more); every rank still gets the same bits.
enum class GradCompression { kNone, kBf16 };

struct ReducerOptions {
  std::size_t firstBucketBytes = std::size_t{1} << 20;
  std::size_t bucketCapBytes = std::size_t{25} << 20;  // 0: one bucket per gradient
  // true: the caller scaled its loss by 1/world, so a sum is the mean (Note
  // [Averaging by pre-scaling] in trainer/trainer.cc); false: the Reducer
  // averages.
  bool gradientsPreScaled = false;
  GradCompression compression = GradCompression::kNone;
  // Empty: every bucket is all-reduced. Otherwise world + 1 offsets into the
  // storage (0 first, storageElements() last): each bucket is
  // reduce-scattered and rank r gets only the elements in
  // [scatterBounds[r], scatterBounds[r+1]) reduced (Note [Reduce-scatter for
  // a sharded optimizer]).
  std::vector<std::size_t> scatterBounds;
};

struct Bucket {
  std::vector<std::size_t> gradients;  // indices into the specs, in storage order
  std::size_t offset = 0;              // first element in the storage
  std::size_t count = 0;               // elements
};

// The bucket layout for `gradients` (a pure function, the same on every rank).
std::vector<Bucket> computeBucketLayout(const std::vector<GradientSpec>& gradients,
                                        std::size_t firstBucketBytes, std::size_t bucketCapBytes);

class Reducer {
 public:
  // Collective over `comm`. Throws MismatchError if the ranks' layouts differ.
  Reducer(Communicator& comm, std::vector<GradientSpec> gradients, ReducerOptions options);
  // Waits (bounded by the communicator's timeout) for buckets still in flight,
  // so the storage is not freed under a running all-reduce. Never throws.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Gradient `index`'s storage (numel floats inside its bucket), valid for the
  // Reducer's life; empty for a frozen gradient. Reduce-scattering, only the
  // elements in this rank's part hold the mean after finalize().
  std::span<float> gradient(std::size_t index);
  // Whether buckets are reduce-scattered (ReducerOptions::scatterBounds).
  bool scatters() const { return !options_.scatterBounds.empty(); }
  // Keeps the storage alive for views handed out (e.g. as tensor owners).
  const std::shared_ptr<void>& storage() const { return storage_; }
  // The float32 elements in storage(): every trainable gradient, contiguous.
  std::size_t storageElements() const { return elements_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<GradientSpec>& gradients() const { return specs_; }
  const ReducerOptions& options() const { return options_; }

  // Re-partitions the same storage into buckets for new caps (the options'
  // meaning). Between backward passes only (after finalize(), or before the
  // first pass); collective, like the constructor: throws MismatchError if
  // the ranks' new layouts differ. gradient(i) and storage() do not change;
  // launches() is emptied.
  void setBucketCaps(std::size_t firstBucketBytes, std::size_t bucketCapBytes);

  void prepareForBackward(bool reduce = true);
  void markReady(std::size_t index);
  void finalize();

  // After finalize(): the first gradient, in registration order, holding a
  // NaN or an infinity, or none. The reduced gradients are the same on every
  // rank, so every rank gets the same answer without communicating (a NaN on
  // any rank spreads to all through the sum). Host memory only (the MPI
  // backend): one read pass over the gradients.
  // Reduce-scattering: collective when some bucket went unchecked (Note
  // [Reduce-scatter for a sharded optimizer]).
  std::optional<std::size_t> firstNonFinite() const;
  // After finalize(): the sum of the squares of every reduced gradient (for
  // the norm that clipping needs), the same bits on every rank. Each
  // bucket's comes from its all-reduce where the backend measured it
  // (CommOptions::sumOfSquares: Note [Sum of squares while reducing] in
  // comm/finite.h), else from a pass over the bucket; the buckets' sums are
  // added in bucket order. Host memory only, like firstNonFinite().
  // Reduce-scattering, collective when some bucket went unmeasured.
  double sumOfSquares() const;

  // The Work of each bucket in the last reducing backward pass (launch order),
  // with the time markReady issued it. For traces and tests.
  struct Launch {
    std::size_t bucket = 0;
    std::chrono::steady_clock::time_point issued;
    WorkPtr work;
  };
  const std::vector<Launch>& launches() const { return launches_; }

 private:
  void launchReadyBuckets();
  // Computes buckets_, locations_ and pending_ from the options' caps and
  // checks that every rank has the same layout. Returns the elements in all.
  std::size_t layOutBuckets();
  // Reduce-scattering: the part of bucket `bucket` this rank owns, as
  // [begin, end) in the storage's elements (empty when it owns none of it).
  std::pair<std::size_t, std::size_t> ownedPart(std::size_t bucket) const;

  struct Location {
    std::size_t bucket = 0;
    std::size_t offset = 0;  // elements from the bucket's start
  };

  Communicator& comm_;
  std::vector<GradientSpec> specs_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<Location> locations_;  // per gradient; frozen ones unused
  std::shared_ptr<void> storage_;
  std::size_t elements_ = 0;  // in storage_
  // kBf16 where the backend rounds itself (MPI: Note [bf16 rounding inside
  // the reduction] in comm/communicator.h): no staging.
  bool roundsInPlace_ = false;
  std::shared_ptr<void> compressed_;  // bfloat16 staging, one slot per element (NCCL's kBf16)
  // Per backward pass:
  bool reducing_ = false;
  // Reduce-scattering, per bucket: its reduceScatter() bounds, from
  // options_.scatterBounds and the layout.
  std::vector<std::vector<std::size_t>> scatterParts_;
  // Reduce-scattering: sumOfSquares()' gather of the ranks' parts, kept so
  // that a step allocates nothing.
  mutable std::vector<double> partSums_;
  std::vector<std::size_t> pending_;  // per bucket: gradients not yet ready
  std::vector<bool> ready_;           // per gradient
  std::size_t nextLaunch_ = 0;        // buckets issued so far
  std::vector<Launch> launches_;
};

}  // namespace ddp::comm
