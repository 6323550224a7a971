#include "comm/reducer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "comm/bfloat16.h"
#include "comm/finite.h"
#include "runtime/error.h"

namespace ddp::comm {
namespace {

// FNV-1a over the layout: equal on every rank iff the layouts are equal.
std::uint64_t layoutHash(const std::vector<Bucket>& buckets,
                         const std::vector<GradientSpec>& specs) {
  std::uint64_t hash = 1469598103934665603ull;
  auto mix = [&](std::uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash ^= (value >> (8 * i)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  mix(specs.size());
  for (const GradientSpec& spec : specs) {
    mix(spec.numel);
    mix(spec.requiresGrad);
  }
  for (const Bucket& bucket : buckets) {
    mix(bucket.count);
    for (std::size_t g : bucket.gradients)
      mix(g);
  }
  return hash;
}

}  // namespace

std::vector<Bucket> computeBucketLayout(const std::vector<GradientSpec>& gradients,
                                        std::size_t firstBucketBytes, std::size_t bucketCapBytes) {
  std::vector<Bucket> buckets;
  Bucket current;
  std::size_t offset = 0;
  if (bucketCapBytes == kSingleBucket) firstBucketBytes = kSingleBucket;
  for (std::size_t i = gradients.size(); i-- > 0;) {
    if (!gradients[i].requiresGrad) continue;
    current.gradients.push_back(i);
    current.count += gradients[i].numel;
    const std::size_t cap = bucketCapBytes == 0 ? 0
                            : buckets.empty()   ? firstBucketBytes
                                                : bucketCapBytes;
    if (current.count * sizeof(float) >= cap) {
      current.offset = offset;
      offset += current.count;
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  if (!current.gradients.empty()) {
    current.offset = offset;
    buckets.push_back(std::move(current));
  }
  return buckets;
}

Reducer::Reducer(Communicator& comm, std::vector<GradientSpec> gradients, ReducerOptions options)
    : comm_(comm),
      specs_(std::move(gradients)),
      options_(std::move(options)),
      locations_(specs_.size()),
      ready_(specs_.size(), false) {
  elements_ = layOutBuckets();
  if (scatters()) {
    checkScatterBounds(options_.scatterBounds, comm_.size());
    DDP_CHECK(options_.scatterBounds.back() == elements_,
              str("reduce-scatter parts that do not end at the ", elements_, " gradient elements"));
    partSums_.resize(static_cast<std::size_t>(comm_.size()));
  }
  storage_ = comm_.allocate(elements_ * sizeof(float));
  if (options_.compression == GradCompression::kBf16) {
    // Every rank gets the same answer for the same allocation, so either all
    // or none allocate below (a collective).
    roundsInPlace_ = comm_.reducesViaBFloat16InPlace();
    if (!roundsInPlace_) compressed_ = comm_.allocate(elements_ * sizeof(std::uint16_t));
  }
}

std::size_t Reducer::layOutBuckets() {
  buckets_ = computeBucketLayout(specs_, options_.firstBucketBytes, options_.bucketCapBytes);
  std::size_t total = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::size_t within = 0;
    for (std::size_t g : buckets_[b].gradients) {
      locations_[g] = Location{b, within};
      within += specs_[g].numel;
    }
    total += buckets_[b].count;
  }
  pending_.assign(buckets_.size(), 0);
  // Each bucket's parts, in its own elements: the ranks' ranges cut to it.
  scatterParts_.clear();
  for (const Bucket& bucket : buckets_) {
    if (!scatters()) break;
    std::vector<std::size_t>& parts = scatterParts_.emplace_back();
    for (std::size_t bound : options_.scatterBounds)
      parts.push_back(std::clamp(bound, bucket.offset, bucket.offset + bucket.count) -
                      bucket.offset);
  }

  // Every rank must have built the same buckets, or the all-reduces would pair
  // up different gradients.
  const std::int64_t mine = static_cast<std::int64_t>(layoutHash(buckets_, specs_));
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm_.size()));
  comm_.allgather(std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(all))
      ->wait(comm_.options().timeout);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      throw MismatchError(str("gradient buckets differ between rank 0 and rank ", r,
                              ": the ranks hold different models or bucket options (this rank has ",
                              specs_.size(), " gradients in ", buckets_.size(), " buckets)"));
    }
  }
  return total;
}

void Reducer::setBucketCaps(std::size_t firstBucketBytes, std::size_t bucketCapBytes) {
  DDP_CHECK(!reducing_, "setBucketCaps during a reducing backward pass (before finalize())");
  // Every launch of the last pass was waited for (or stream-ordered) by
  // finalize(), and the storage stays: nothing in flight refers to a bucket.
  launches_.clear();
  nextLaunch_ = 0;
  std::vector<float*> before;
  for (std::size_t g = 0; g < specs_.size(); ++g)
    before.push_back(specs_[g].requiresGrad ? gradient(g).data() : nullptr);
  options_.firstBucketBytes = firstBucketBytes;
  options_.bucketCapBytes = bucketCapBytes;
  layOutBuckets();
  for (std::size_t g = 0; g < specs_.size(); ++g) {
    DDP_CHECK(!specs_[g].requiresGrad || gradient(g).data() == before[g],
              str("re-bucketing moved gradient '", specs_[g].name, "'"));
  }
}

// Never waits: a Reducer destroyed with collectives in flight is being
// unwound by a failure (a timeout), and waiting another --timeout per bucket
// would only delay the report. Instead each collective still in flight keeps
// the buffer it reduces (a no-op for completed ones), so the backend never
// writes into freed memory, and the steps pay nothing for it.
Reducer::~Reducer() {
  for (Launch& launch : launches_)
    launch.work->retain(compressed_ ? compressed_ : storage_);
}

std::span<float> Reducer::gradient(std::size_t index) {
  DDP_CHECK(index < specs_.size(), str("gradient index ", index, " out of range"));
  if (!specs_[index].requiresGrad) return {};
  const Location& at = locations_[index];
  float* base = static_cast<float*>(storage_.get()) + buckets_[at.bucket].offset + at.offset;
  return {base, specs_[index].numel};
}

void Reducer::prepareForBackward(bool reduce) {
  DDP_CHECK(
      nextLaunch_ == 0 || nextLaunch_ == buckets_.size(),
      "prepareForBackward while buckets of the previous pass are in flight (finalize() missing)");
  reducing_ = reduce;
  nextLaunch_ = 0;
  if (!reduce) return;
  launches_.clear();
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    pending_[b] = buckets_[b].gradients.size();
  std::fill(ready_.begin(), ready_.end(), false);
}

void Reducer::markReady(std::size_t index) {
  if (!reducing_) return;
  DDP_CHECK(index < specs_.size() && specs_[index].requiresGrad,
            str("markReady for gradient ", index, ", which is frozen or does not exist"));
  if (ready_[index]) {
    throw InternalError(
        str("gradient '", specs_[index].name, "' was marked ready twice in one backward pass"));
  }
  ready_[index] = true;
  --pending_[locations_[index].bucket];
  launchReadyBuckets();
}

void Reducer::launchReadyBuckets() {
  const ReduceOp op = options_.gradientsPreScaled ? ReduceOp::kSum : ReduceOp::kAvg;
  while (nextLaunch_ < buckets_.size() && pending_[nextLaunch_] == 0) {
    const Bucket& bucket = buckets_[nextLaunch_];
    float* data = static_cast<float*>(storage_.get()) + bucket.offset;
    WorkPtr work;
    const std::string outer = comm_.context();
    comm_.setContext(
        str(outer, outer.empty() ? "" : ", ", "bucket ", nextLaunch_, " of ", buckets_.size()));
    void* wire = data;
    DataType type = DataType::kFloat32;
    if (compressed_) {  // the bf16 hook: round into the staging buffer and reduce that
      auto* rounded = static_cast<std::uint16_t*>(compressed_.get()) + bucket.offset;
      comm_.narrowToBFloat16(data, rounded, bucket.count);
      wire = rounded;
      type = DataType::kBFloat16;
    }
    if (roundsInPlace_) {  // Note [bf16 rounding inside the reduction]
      work = scatters() ? comm_.reduceScatterViaBFloat16(data, scatterParts_[nextLaunch_], op)
                        : comm_.allreduceViaBFloat16(data, bucket.count, op);
    } else if (scatters()) {  // Note [Reduce-scatter for a sharded optimizer]
      work = comm_.reduceScatter(wire, scatterParts_[nextLaunch_], type, op);
    } else {
      work = comm_.allreduce(wire, bucket.count, type, op);
    }
    comm_.setContext(outer);
    launches_.push_back(Launch{nextLaunch_, std::chrono::steady_clock::now(), std::move(work)});
    ++nextLaunch_;
  }
}

void Reducer::finalize() {
  if (!reducing_) return;
  for (std::size_t b = nextLaunch_; b < buckets_.size(); ++b) {
    if (pending_[b] == 0) continue;
    for (std::size_t g : buckets_[b].gradients) {
      if (!ready_[g]) {
        throw InternalError(
            str("finalize(): gradient '", specs_[g].name,
                "' was never marked ready in this backward pass (is it used by the model?)"));
      }
    }
  }
  for (Launch& launch : launches_) {
    // Device backends: the compute stream waits, not the host (host ones: a wait).
    launch.work->synchronize(comm_.options().timeout);
    if (!compressed_) continue;
    // Widen the mean back into the gradients: this rank's part of it, when
    // reduce-scattering. On a device, queued after that wait.
    const Bucket& bucket = buckets_[launch.bucket];
    const auto [begin, end] = scatters() ? ownedPart(launch.bucket)
                                         : std::pair{bucket.offset, bucket.offset + bucket.count};
    comm_.widenFromBFloat16(static_cast<const std::uint16_t*>(compressed_.get()) + begin,
                            static_cast<float*>(storage_.get()) + begin, end - begin);
  }
  reducing_ = false;
}

std::pair<std::size_t, std::size_t> Reducer::ownedPart(std::size_t bucket) const {
  const auto r = static_cast<std::size_t>(comm_.rank());
  const std::vector<std::size_t>& parts = scatterParts_[bucket];
  return {buckets_[bucket].offset + parts[r], buckets_[bucket].offset + parts[r + 1]};
}

std::optional<std::size_t> Reducer::firstNonFinite() const {
  DDP_CHECK(comm_.allocatedMemory() == Communicator::Memory::kHost,
            "firstNonFinite() reads gradients on the host; this backend keeps them on the device");
  const float* storage = static_cast<const float*>(storage_.get());
  // Note [Non-finite check while reducing]: most buckets were checked already.
  bool any = false;
  bool partial = false;  // some answer covers this rank's part only
  for (const Launch& launch : launches_) {
    const Bucket& bucket = buckets_[launch.bucket];
    // With bf16 compression the flag is the wire's; widening keeps it exact.
    if (const std::optional<bool> checked = launch.work->resultChecks().nonFinite) {
      any = any || *checked;
    } else if (scatters()) {
      const auto [begin, end] = ownedPart(launch.bucket);
      any = any || anyNonFinite(storage + begin, end - begin);
      partial = true;
    } else {
      any = any || anyNonFinite(storage + bucket.offset, bucket.count);
    }
  }
  // Every rank has the same checks, so every rank takes the same branches
  // and the collectives below pair up (Note [Reduce-scatter for a sharded
  // optimizer]).
  const auto agree = [this]<class T>(T value, ReduceOp op) {
    comm_.allreduce(std::span<T>(&value, 1), op)->wait(comm_.options().timeout);
    return value;
  };
  if (partial) any = agree(std::int32_t{any ? 1 : 0}, ReduceOp::kMax) != 0;
  if (!any) return std::nullopt;
  const std::pair<std::size_t, std::size_t> everything{0, elements_};
  const auto r = static_cast<std::size_t>(comm_.rank());
  const auto [mine, mineEnd] =
      scatters() ? std::pair{options_.scatterBounds[r], options_.scatterBounds[r + 1]} : everything;
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  for (std::size_t g = 0; g < specs_.size(); ++g) {
    if (!specs_[g].requiresGrad) continue;
    const Location& at = locations_[g];
    const std::size_t begin = buckets_[at.bucket].offset + at.offset;
    const std::size_t from = std::max(begin, mine), to = std::min(begin + specs_[g].numel, mineEnd);
    if (from < to && anyNonFinite(storage + from, to - from)) {
      first = static_cast<std::int64_t>(g);
      break;
    }
  }
  if (scatters()) first = agree(first, ReduceOp::kMin);
  if (first == std::numeric_limits<std::int64_t>::max())
    throw InternalError("a bucket holds a non-finite value that no gradient does");
  return static_cast<std::size_t>(first);
}

double Reducer::sumOfSquares() const {
  DDP_CHECK(comm_.allocatedMemory() == Communicator::Memory::kHost,
            "sumOfSquares() reads gradients on the host; this backend keeps them on the device");
  const float* storage = static_cast<const float*>(storage_.get());
  double total = 0.0;
  double mine = 0.0;  // reduce-scattering: this rank's part of the unmeasured buckets
  bool partial = false;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::optional<double> measured;
    if (b < launches_.size()) {
      DDP_CHECK(launches_[b].bucket == b, "buckets launched out of order");
      measured = launches_[b].work->resultChecks().sumOfSquares;  // none for staged bfloat16
    }
    if (measured) {
      total += *measured;
    } else if (scatters()) {
      const auto [begin, end] = ownedPart(b);
      mine += comm::sumOfSquares(storage + begin, end - begin);
      partial = true;
    } else {
      total += comm::sumOfSquares(storage + buckets_[b].offset, buckets_[b].count);
    }
  }
  if (!partial) return total;
  // Every rank adds every rank's part in rank order: the same bits everywhere.
  comm_.allgather(std::span<const double>(&mine, 1), std::span<double>(partSums_))
      ->wait(comm_.options().timeout);
  for (double part : partSums_)
    total += part;
  return total;
}

}  // namespace ddp::comm
