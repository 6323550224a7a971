#include "trainer/distributed_sampler.h"

#include <numeric>

#include "runtime/error.h"
#include "trainer/random.h"

namespace ddp::trainer {

DistributedSampler::DistributedSampler(std::size_t datasetSize, int worldSize, int rank,
                                       SamplerOptions options)
    : size_(datasetSize), world_(worldSize), rank_(rank), options_(options) {
  DDP_CHECK(worldSize > 0 && rank >= 0 && rank < worldSize, "sampler: bad rank or world size");
  const auto world = static_cast<std::size_t>(worldSize);
  perRank_ = options_.dropLast ? size_ / world : (size_ + world - 1) / world;
}

std::vector<std::size_t> DistributedSampler::order() const {
  std::vector<std::size_t> order;
  if (options_.shuffle) {
    order = randomPermutation(size_, options_.seed + epoch_);
  } else {
    order.resize(size_);
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
  return order;
}

std::vector<std::size_t> DistributedSampler::indices() const {
  return remainingIndices(0);
}

std::vector<std::size_t> DistributedSampler::remainingIndices(std::size_t consumed) const {
  const std::vector<std::size_t> all = order();
  const auto world = static_cast<std::size_t>(world_);
  // The positions not yet trained on, cut or padded to a multiple of world.
  std::vector<std::size_t> rest(
      all.begin() + static_cast<std::ptrdiff_t>(std::min(consumed, size_)), all.end());
  if (options_.dropLast) {
    rest.resize(rest.size() / world * world);
  } else if (!rest.empty() && size_ > 0) {  // pad by repeating the head, wrapping if needed
    for (std::size_t i = 0; rest.size() % world != 0; ++i)
      rest.push_back(all[i % size_]);
  }
  std::vector<std::size_t> shard;
  shard.reserve(rest.size() / world);
  for (std::size_t i = static_cast<std::size_t>(rank_); i < rest.size(); i += world)
    shard.push_back(rest[i]);
  return shard;
}

std::vector<std::size_t> evaluationShard(std::size_t datasetSize, int worldSize, int rank) {
  std::vector<std::size_t> shard;
  for (std::size_t i = static_cast<std::size_t>(rank); i < datasetSize;
       i += static_cast<std::size_t>(worldSize)) {
    shard.push_back(i);
  }
  return shard;
}

}  // namespace ddp::trainer
