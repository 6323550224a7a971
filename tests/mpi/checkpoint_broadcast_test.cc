// restoreCheckpointFromRoot (Note [Restoring a checkpoint from one rank]):
// only the root reads the file; every rank ends with the written model's
// weights, the position and its optimizer state, whole or (sharded) its part,
// with pieces small enough to cut across tensors and shards; a rank whose
// model differs stops every rank before anything is copied.
#include "trainer/checkpoint_broadcast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../unit/test_files.h"
#include "comm/agreement.h"
#include "runtime/error.h"
#include "test_comm.h"
#include "trainer/adamw.h"
#include "trainer/mlp.h"
#include "trainer/sharded_optimizer.h"

namespace ddp::trainer {
namespace {

const AdamWOptions kAdamW{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, true};
// 7 floats: pieces end inside every tensor of the 12-7-3 MLP (84, 7, 21, 3
// elements) and inside the shards of 1, 2 and 3 ranks (115 elements).
constexpr std::size_t kPieceBytes = 7 * sizeof(float);

TrainPosition somePosition() {
  TrainPosition at;
  at.epoch = 3;
  at.consumed = 96;
  at.globalStep = 41;
  at.worldSize = 5;
  at.epochLossSum = 0.1 + 0.2;  // must come back bit for bit
  at.epochSteps = 6;
  at.globalBatch = 30;
  at.best.metric = BestMetric::kTestAccuracy;  // Note [Keeping the best weights]
  at.best.step = 35;
  at.best.testLoss = 0.3 + 0.1;
  at.best.testAccuracy = 0.7 + 0.2;
  at.best.testSamples = 250;
  at.best.evaluationsSince = 2;
  at.best.referenceStep = 30;  // Note [How much better counts for --early-stop]
  at.best.referenceValue = 0.8 + 0.05;
  return at;
}

// Gradients seeded by step and position, the same on every rank.
void setGradients(Sequential& model, int step) {
  std::size_t k = 0;
  for (Parameter* p : model.parameters()) {
    for (std::size_t j = 0; j < p->grad.numel(); ++j, ++k)
      p->grad.data()[j] =
          0.05f * static_cast<float>((k * 5 + static_cast<std::size_t>(step)) % 17) - 0.4f;
  }
}

std::unique_ptr<Optimizer> makeOptimizer(comm::Communicator& comm, Sequential& model,
                                         bool sharded) {
  if (!sharded) return std::make_unique<AdamW>(model.parameters(), kAdamW);
  return std::make_unique<ShardedOptimizer>(
      comm, model.parameters(), [](std::vector<Parameter*> parameters) {
        return std::make_unique<AdamW>(std::move(parameters), kAdamW);
      });
}

void expectSameWeights(Sequential& a, Sequential& b, const std::string& what) {
  const auto pa = a.parameters(), pb = b.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i]->value.numel(), pb[i]->value.numel());
    EXPECT_EQ(
        std::memcmp(pa[i]->value.data(), pb[i]->value.data(), pa[i]->value.numel() * sizeof(float)),
        0)
        << what << ": " << pa[i]->name;
  }
}

// The root (the last rank) writes a checkpoint of a model trained `steps`
// steps and reads it back; the other ranks only build the same model.
struct Written {
  testing::TempDir dir;
  std::unique_ptr<Sequential> model = buildMlp(12, {7}, 3, 1);
  AdamW adamw{model->parameters(), kAdamW};
  SafetensorsFile file;
  CheckedCheckpoint checked;
  Written(int steps, bool atRoot) {
    for (int step = 0; step < steps; ++step) {
      setGradients(*model, step);
      adamw.step();
    }
    if (!atRoot) return;
    const std::string path = checkpointPath(dir.path(), 41);
    saveCheckpoint(path, *model, adamw, somePosition(), {});
    file = loadSafetensors(path);
    checked = checkCheckpoint(path, file, *model, adamw, {});
  }
};

class RestoreFromRoot : public ::testing::TestWithParam<bool> {};  // sharded?

TEST_P(RestoreFromRoot, GivesEveryRankTheWeightsPositionAndItsState) {
  auto comm = comm::makeTestComm();
  const int root = comm->size() - 1;
  const bool atRoot = comm->rank() == root;
  Written written(2, atRoot);
  auto model = buildMlp(12, {7}, 3, 99);  // other weights until restored
  auto optimizer = makeOptimizer(*comm, *model, GetParam());
  const TrainPosition at = restoreCheckpointFromRoot(*comm, root, atRoot ? &written.file : nullptr,
                                                     atRoot ? written.checked : CheckedCheckpoint{},
                                                     *model, *optimizer, kPieceBytes);
  EXPECT_EQ(at.epoch, 3u);
  EXPECT_EQ(at.consumed, 96u);
  EXPECT_EQ(at.globalStep, 41u);
  EXPECT_EQ(at.worldSize, 5);
  EXPECT_EQ(at.epochLossSum, 0.1 + 0.2);
  EXPECT_EQ(at.epochSteps, 6u);
  EXPECT_EQ(at.globalBatch, 30u);
  EXPECT_EQ(at.best.metric, BestMetric::kTestAccuracy);
  EXPECT_EQ(at.best.step, 35u);
  EXPECT_EQ(at.best.testLoss, 0.3 + 0.1);
  EXPECT_EQ(at.best.testAccuracy, 0.7 + 0.2);
  EXPECT_EQ(at.best.testSamples, 250u);
  EXPECT_EQ(at.best.evaluationsSince, 2u);
  EXPECT_EQ(at.best.referenceStep, 30u);
  EXPECT_EQ(at.best.referenceValue, 0.8 + 0.05);
  expectSameWeights(*written.model, *model, "restored");
  // The state came too (both moments and the step count): the next step is
  // the written optimizer's next step, bit for bit.
  setGradients(*written.model, 2);
  setGradients(*model, 2);
  written.adamw.step();
  optimizer->step();
  expectSameWeights(*written.model, *model, "one step after the restore");
  if (!GetParam()) return;
  // Sharded: no rank held the whole state; gathered, it is the written one.
  optimizer->gatherState(root);
  std::map<std::string, const Tensor*> expected;
  for (const OptimizerState& slot : written.adamw.state())
    expected[slot.name] = slot.tensor;
  const std::vector<OptimizerState> gathered = optimizer->state();
  ASSERT_EQ(gathered.size(), expected.size());
  for (const OptimizerState& slot : gathered) {
    if (!atRoot) break;
    ASSERT_TRUE(expected.contains(slot.name)) << slot.name;
    const Tensor& want = *expected.at(slot.name);
    ASSERT_EQ(slot.tensor->numel(), want.numel()) << slot.name;
    EXPECT_EQ(std::memcmp(slot.tensor->data(), want.data(), want.numel() * sizeof(float)), 0)
        << slot.name;
  }
}

TEST_P(RestoreFromRoot, ACheckpointWithoutStateLeavesNone) {
  auto comm = comm::makeTestComm();
  const int root = comm->size() - 1;
  const bool atRoot = comm->rank() == root;
  Written written(0, atRoot);  // before the first step: no state in the file
  auto model = buildMlp(12, {7}, 3, 99);
  auto optimizer = makeOptimizer(*comm, *model, GetParam());
  setGradients(*model, 0);
  optimizer->step();  // state that the restore must clear
  restoreCheckpointFromRoot(*comm, root, atRoot ? &written.file : nullptr,
                            atRoot ? written.checked : CheckedCheckpoint{}, *model, *optimizer,
                            kPieceBytes);
  expectSameWeights(*written.model, *model, "restored");
  optimizer->gatherState(root);
  for (const OptimizerState& slot : optimizer->state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;
}

INSTANTIATE_TEST_SUITE_P(ShardedOrNot, RestoreFromRoot, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "sharded" : "whole"; });

TEST(RestoreFromRootMismatch, ARankWithAnotherModelStopsEveryRankBeforeAnyCopy) {
  auto comm = comm::makeTestComm();
  if (comm->size() == 1) GTEST_SKIP() << "needs a rank besides the root";
  const int root = 0, odd = comm->size() - 1;
  const bool atRoot = comm->rank() == root;
  Written written(1, atRoot);
  // The last rank's hidden layer is one wider.
  auto model = buildMlp(12, {comm->rank() == odd ? 8u : 7u}, 3, 99);
  auto before = buildMlp(12, {comm->rank() == odd ? 8u : 7u}, 3, 99);
  AdamW adamw(model->parameters(), kAdamW);
  try {
    restoreCheckpointFromRoot(*comm, root, atRoot ? &written.file : nullptr,
                              atRoot ? written.checked : CheckedCheckpoint{}, *model, adamw,
                              kPieceBytes);
    ADD_FAILURE() << "restored although rank " << odd << "'s model differs";
  } catch (const MismatchError& e) {
    EXPECT_EQ(comm->rank(), odd);
    EXPECT_NE(
        std::string(e.what()).find("'layers.0.weight 96' where rank 0 has 'layers.0.weight 84'"),
        std::string::npos)
        << e.what();
  } catch (const comm::PeerFailedError& e) {
    EXPECT_NE(comm->rank(), odd) << e.what();
  }
  expectSameWeights(*before, *model, "after the refusal");  // nothing copied
}

}  // namespace
}  // namespace ddp::trainer
