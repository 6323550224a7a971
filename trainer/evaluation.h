// A model's loss and accuracy on a data set, over every rank: the Trainer's
// evaluation at each epoch's end, and ddp_train --evaluate's, which builds no
// training set, optimizer or Reducer (Note [Evaluating without training] in
// launcher/evaluate.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "trainer/batch_loader.h"
#include "trainer/dataset.h"
#include "trainer/sequential.h"

namespace ddp::trainer {

// Samples per evaluation batch: ddp_train's, at the end of each epoch and
// under --evaluate.
inline constexpr std::size_t kEvalBatchSize = 1000;

// Which result of an evaluation --save-best keeps and --early-stop watches
// (--best-metric): the test loss, lower is better, or the test accuracy,
// higher is better.
enum class BestMetric { kTestLoss, kTestAccuracy };

// "test_loss", "test_accuracy": the option's values, the --metrics keys.
const char* bestMetricName(BestMetric metric);
// The metric named `name`; nullopt for any other name.
std::optional<BestMetric> parseBestMetric(const std::string& name);

struct EvalResult {
  double loss = 0.0;      // mean over the samples
  double accuracy = 0.0;  // fraction in [0, 1]
  std::size_t samples = 0;
};

// What a run makes of one of its evaluations (TrainOptions::judgeEvaluation).
struct EvaluationVerdict {
  bool best = false;  // the best of the run so far (--save-best writes it)
  bool stop = false;  // the run ends here (--early-stop)
};

// Collective: every rank calls it with the same data set, whose first
// `samples` samples (0: all; at most its size) are shared out without
// padding (evaluationShard: rank r takes r, r + world, ...), so each sample
// counts once at any world size. Each rank forwards its
// share in batches of `batchSize` through `batches` (on the model's device)
// and one all-reduce sums the loss, the correct rows and the samples. Sets
// `comm`'s context to each batch, as progress for the watchdog: there is no
// collective until the end (Note [Where a stuck rank is] in
// comm/watchdog.h).
EvalResult evaluate(comm::Communicator& comm, Sequential& model, const Dataset& data,
                    std::size_t batchSize, BatchLoader& batches, std::size_t samples = 0);

// Makes every rank's parameters equal to rank 0's: the start-up broadcast,
// after which every rank holds the same replica (Note [Checking that the
// replicas agree] in trainer/replica_check.h). Collective.
void broadcastParameters(comm::Communicator& comm, Sequential& model);

}  // namespace ddp::trainer
