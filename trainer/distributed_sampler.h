// DistributedSampler: which samples this rank sees in an epoch.
//
// PyTorch's torch.utils.data.DistributedSampler semantics:
//   * the order is a permutation drawn from seed + epoch (identical on every
//     rank, different each epoch), or 0..n-1 without shuffling;
//   * without drop_last the order is padded to a multiple of the world size
//     by repeating its head (wrapping as often as needed), so every rank gets
//     ceil(n / world) samples; with drop_last the tail is cut instead, so each
//     rank gets floor(n / world) samples and none repeats;
//   * rank r takes positions r, r + world, r + 2*world, ... (a strided shard).
// Strided shards make np=N with batch B see, step by step, exactly the samples
// np=1 sees with batch N*B (positions s*N*B .. (s+1)*N*B of the same order).
// The permutation itself comes from our own generator (trainer/random.h), not
// torch.randperm: same semantics, different order than PyTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp::trainer {

struct SamplerOptions {
  bool shuffle = true;
  bool dropLast = false;
  std::uint64_t seed = 0;
};

class DistributedSampler {
 public:
  DistributedSampler(std::size_t datasetSize, int worldSize, int rank, SamplerOptions options);

  void setEpoch(std::uint64_t epoch) { epoch_ = epoch; }
  // This rank's sample indices for the current epoch, in order.
  std::vector<std::size_t> indices() const;
  // This rank's samples for the rest of the current epoch when its first
  // `consumed` positions (over all ranks, of whatever world size trained
  // them) were already trained on: resuming from a checkpoint. The rest of
  // the order is padded (by repeating the order's head, at most world - 1
  // samples, as every epoch is) or cut (--drop-last) to a multiple of this
  // world size and sharded strided. With the world size that trained the
  // first `consumed`, this is exactly the tail of indices(); with another,
  // every sample not yet trained on this epoch is seen once.
  std::vector<std::size_t> remainingIndices(std::size_t consumed) const;
  // Samples per rank per epoch (the length of indices()).
  std::size_t samplesPerRank() const { return perRank_; }
  // Samples over all ranks per epoch (with padding, without the dropped tail).
  std::size_t totalSize() const { return perRank_ * static_cast<std::size_t>(world_); }

 private:
  std::vector<std::size_t> order() const;  // this epoch's permutation, unpadded

  std::size_t size_;
  int world_;
  int rank_;
  SamplerOptions options_;
  std::uint64_t epoch_ = 0;
  std::size_t perRank_;
};

// Evaluation shard: rank r takes r, r + world, ... < n, with no padding, so
// that summed over ranks every sample is counted exactly once.
std::vector<std::size_t> evaluationShard(std::size_t datasetSize, int worldSize, int rank);

}  // namespace ddp::trainer
