#include "trainer/batch_loader.h"

#include "ddp_config.h"
#include "runtime/error.h"
#if DDP_WITH_CUDA
#include "trainer/cuda/device_batches.h"
#endif

namespace ddp::trainer {

#if DDP_WITH_CUDA
struct BatchLoader::OnGpu {
  explicit OnGpu(unsigned gatherThreads) : batches(gatherThreads) {}
  cuda::DeviceBatches batches;
};
#else
struct BatchLoader::OnGpu {};
#endif

BatchLoader::BatchLoader(Device device, unsigned gatherThreads) : device_(device) {
#if DDP_WITH_CUDA
  if (device == Device::kCuda) gpu_ = std::make_unique<OnGpu>(gatherThreads);
#else
  DDP_CHECK(device == Device::kCpu, "a GPU batch loader in a build without CUDA");
  (void)gatherThreads;
#endif
}

BatchLoader::~BatchLoader() = default;

BatchLoader::Batch BatchLoader::load(const Dataset& dataset, std::span<const std::size_t> indices) {
#if DDP_WITH_CUDA
  if (gpu_) {
    const cuda::DeviceBatches::Batch batch = gpu_->batches.load(dataset, indices);
    return {batch.features, batch.labels};
  }
#endif
  features_.resize({indices.size(), dataset.featureDim()});
  labels_.resize(indices.size());
  dataset.gather(indices, features_.data(), labels_.data());
  return {features_, labels_.data()};
}

const Tensor& forwardWithLoss(Sequential& model, SoftmaxCrossEntropy& loss,
                              const BatchLoader::Batch& batch, double weight, LossTotals& totals) {
  const Tensor& logits = model.forward(batch.features);
  if (totals.device() == Device::kCuda) {
    loss.forward(logits, batch.labels, weight, totals);
  } else {
    const LossResult result = loss.forward(logits, std::span(batch.labels, logits.dim(0)));
    totals.add(weight * result.loss, static_cast<double>(result.correct));
  }
  return logits;
}

}  // namespace ddp::trainer
