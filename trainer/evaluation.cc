#include "trainer/evaluation.h"

#include <algorithm>
#include <span>
#include <vector>

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/cross_entropy.h"
#include "trainer/distributed_sampler.h"

namespace ddp::trainer {

const char* bestMetricName(BestMetric metric) {
  return metric == BestMetric::kTestAccuracy ? "test_accuracy" : "test_loss";
}

std::optional<BestMetric> parseBestMetric(const std::string& name) {
  if (name == "test_loss") return BestMetric::kTestLoss;
  if (name == "test_accuracy") return BestMetric::kTestAccuracy;
  return std::nullopt;
}

EvalResult evaluate(comm::Communicator& comm, Sequential& model, const Dataset& data,
                    std::size_t batchSize, BatchLoader& batches, std::size_t samples) {
  DDP_CHECK(batchSize > 0, "an evaluation batch must hold a sample");
  const std::size_t evaluated = samples == 0 ? data.size() : std::min(samples, data.size());
  const std::vector<std::size_t> shard = evaluationShard(evaluated, comm.size(), comm.rank());
  SoftmaxCrossEntropy loss;
  LossTotals sums(batches.device());
  const std::size_t count = (shard.size() + batchSize - 1) / batchSize;
  for (std::size_t begin = 0; begin < shard.size(); begin += batchSize) {
    const std::size_t end = std::min(shard.size(), begin + batchSize);
    const auto indices = std::span(shard).subspan(begin, end - begin);
    comm.setContext(str("evaluation, batch ", begin / batchSize + 1, " of ", count));
    forwardWithLoss(model, loss, batches.load(data, indices), static_cast<double>(indices.size()),
                    sums);
  }
  const auto [lossSum, correct] = sums.take();  // waits for the device
  double totals[3] = {lossSum, correct, static_cast<double>(shard.size())};
  comm.allreduceSync(std::span<double>(totals), comm::ReduceOp::kSum);
  EvalResult result;
  result.samples = static_cast<std::size_t>(totals[2]);
  if (totals[2] > 0) {
    result.loss = totals[0] / totals[2];
    result.accuracy = totals[1] / totals[2];
  }
  return result;
}

void broadcastParameters(comm::Communicator& comm, Sequential& model) {
  std::vector<comm::WorkPtr> pending;
  for (Parameter* p : model.parameters())
    pending.push_back(comm.broadcast(p->value.span(), 0));
  for (auto& work : pending)
    work->wait(comm.options().timeout);
}

}  // namespace ddp::trainer
