// Checkpoints: the position and optimizer state come back as written, the
// newest complete file is found by step, retention, a checkpoint whose
// checksums are gone is refused (Note [Checksums in safetensors files]), and
// the background writer (Note [Checkpoints written in the background]).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "test_files.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/mlp.h"
#include "trainer/sgd.h"

namespace ddp::trainer {
namespace {

using ddp::testing::statusBytes;
using ddp::testing::TempDir;

TrainPosition somePosition() {
  TrainPosition at;
  at.epoch = 2;
  at.consumed = 224;
  at.globalStep = 70;
  at.worldSize = 2;
  at.epochLossSum = 0.1 + 0.2;  // not exact in decimal: must come back bit for bit
  at.epochSteps = 7;
  at.globalBatch = 96;
  return at;
}

// A model whose optimizer has taken a step, so it has momentum buffers.
struct TrainedModel {
  std::unique_ptr<Sequential> model;
  Sgd sgd;
  explicit TrainedModel(std::uint64_t seed)
      : model(buildMlp(3, {4}, 2, seed)), sgd(model->parameters(), {0.1f, 0.9f, 0.0f, false}) {
    for (Parameter* p : model->parameters())
      std::fill(p->grad.data(), p->grad.data() + p->grad.numel(), 0.5f);
    sgd.step();
  }
};

TEST(Checkpoint, RestoresParametersMomentumAndPositionExactly) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *written.model, written.sgd, somePosition(), {{"ddp.option.lr", "0.1"}});
  const TrainPosition at =
      loadCheckpoint(path, *restored.model, restored.sgd, {{"ddp.option.lr", "0.1"}});
  EXPECT_EQ(at.epoch, 2u);
  EXPECT_EQ(at.consumed, 224u);
  EXPECT_EQ(at.globalStep, 70u);
  EXPECT_EQ(at.worldSize, 2);
  EXPECT_EQ(at.epochLossSum, 0.1 + 0.2);
  EXPECT_EQ(at.epochSteps, 7u);
  EXPECT_EQ(at.globalBatch, 96u);
  const auto a = written.model->parameters(), b = restored.model->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t j = 0; j < a[i]->value.numel(); ++j) {
      ASSERT_EQ(a[i]->value.data()[j], b[i]->value.data()[j]) << a[i]->name;
      ASSERT_EQ(written.sgd.momentumBuffers()[i].data()[j],
                restored.sgd.momentumBuffers()[i].data()[j])
          << a[i]->name;
    }
  }
}

// --init-from a checkpoint: its weights, not its momentum (a new run's SGD
// starts without); a plain model file loads as before.
TEST(Checkpoint, InitFromTakesTheWeightsOfACheckpointOrOfAModelFile) {
  TempDir dir;
  TrainedModel written(1);
  const std::string checkpoint = checkpointPath(dir.file(""), 70);
  saveCheckpoint(checkpoint, *written.model, written.sgd, somePosition(), {});
  saveModel(dir.file("model.safetensors"), *written.model);
  for (const std::string& path : {checkpoint, dir.file("model.safetensors")}) {
    auto fresh = buildMlp(3, {4}, 2, 2);
    const std::optional<std::size_t> step = loadWeights(path, *fresh).checkpointStep;
    EXPECT_EQ(step, path == checkpoint ? std::optional<std::size_t>(70) : std::nullopt) << path;
    const auto a = written.model->parameters(), b = fresh->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) {
      for (std::size_t j = 0; j < a[i]->value.numel(); ++j)
        ASSERT_EQ(a[i]->value.data()[j], b[i]->value.data()[j]) << path << " " << a[i]->name;
    }
  }
  // Another model's checkpoint is still refused, naming the difference.
  auto wider = buildMlp(3, {5}, 2, 2);
  try {
    loadWeights(checkpoint, *wider);
    FAIL() << "loaded a checkpoint of another shape";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("has shape [4] but the model's is [5]"), std::string::npos)
        << e.what();
  }
}

// AdamW after two steps: its moments and step count.
struct AdamWModel {
  std::unique_ptr<Sequential> model;
  AdamW adamw;
  explicit AdamWModel(std::uint64_t seed)
      : model(buildMlp(3, {4}, 2, seed)),
        adamw(model->parameters(), {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f}) {
    for (int step = 0; step < 2; ++step) {
      for (Parameter* p : model->parameters())
        std::fill(p->grad.data(), p->grad.data() + p->grad.numel(), 0.5f - step);
      adamw.step();
    }
  }
};

std::vector<float> values(const Tensor& t) {
  return {t.data(), t.data() + t.numel()};
}

// Note [Optimizer state in checkpoints]: every state tensor comes back, and
// the next step is the same on both.
TEST(Checkpoint, RestoresAdamWStateExactly) {
  TempDir dir;
  AdamWModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 2);
  saveCheckpoint(path, *written.model, written.adamw, somePosition(), {});
  EXPECT_EQ(loadSafetensors(path).tensors.size(), 4u + 2 * 4 + 1);  // weights, moments, step
  loadCheckpoint(path, *restored.model, restored.adamw, {});
  const auto a = written.adamw.state(), b = restored.adamw.state();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(values(*a[i].tensor), values(*b[i].tensor)) << a[i].name;
  EXPECT_EQ(values(*b.back().tensor), std::vector<float>{2.0f});  // "step"
  written.adamw.step();
  restored.adamw.step();
  EXPECT_EQ(values(written.model->parameters()[0]->value),
            values(restored.model->parameters()[0]->value));
}

// Restoring refuses (changing nothing) a checkpoint holding part of the
// state, or state of another optimizer.
TEST(Checkpoint, OptimizerStateMustBeAllOrNoneAndThisOptimizers) {
  TempDir dir;
  AdamWModel adamw(1), target(2);
  TrainedModel sgd(1);
  const std::string adamwPath = checkpointPath(dir.file(""), 2);
  const std::string sgdPath = checkpointPath(dir.file(""), 3);
  saveCheckpoint(adamwPath, *adamw.model, adamw.adamw, somePosition(), {});
  saveCheckpoint(sgdPath, *sgd.model, sgd.sgd, somePosition(), {});
  SafetensorsFile partial = loadSafetensors(adamwPath);
  partial.tensors.erase("optimizer.exp_avg_sq.layers.0.bias");
  const std::vector<float> before = values(target.model->parameters()[0]->value);
  const auto refused = [&](const SafetensorsFile& file, const std::string& path,
                           const std::string& expected) {
    try {
      restoreCheckpoint(path, file, *target.model, target.adamw, {});
      ADD_FAILURE() << "restored " << path;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(values(target.model->parameters()[0]->value), before);
  };
  refused(partial, adamwPath,
          "holds 8 of adamw's 9 optimizer state tensors (no "
          "'optimizer.exp_avg_sq.layers.0.bias'): all or none");
  refused(loadSafetensors(sgdPath), sgdPath,
          "holds optimizer state 'optimizer.momentum.layers.0.bias', which adamw does not keep");
}

// A checkpoint written before any update (the first steps skipped as
// non-finite) holds no optimizer state, and restores to none.
TEST(Checkpoint, WithoutOptimizerStateRestoresToNone) {
  TempDir dir;
  auto model = buildMlp(3, {4}, 2, 1);
  Sgd fresh(model->parameters(), {0.1f, 0.9f, 0.0f, false});
  TrainedModel target(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *model, fresh, somePosition(), {});
  loadCheckpoint(path, *target.model, target.sgd, {});
  for (const OptimizerState& slot : target.sgd.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;
}

// Files written before --optimizer existed record no optimizer: they were
// SGD runs, and resume as such only.
TEST(Checkpoint, AnOlderFileWithoutTheOptimizerOptionWasSgd) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *written.model, written.sgd, somePosition(), {});
  loadCheckpoint(path, *restored.model, restored.sgd, {{"ddp.option.optimizer", "sgd"}});
  try {
    loadCheckpoint(path, *restored.model, restored.sgd, {{"ddp.option.optimizer", "adamw"}});
    FAIL() << "an SGD checkpoint resumed as AdamW";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "was written with other options than this run's: --optimizer 'sgd' (this "
                  "run: 'adamw')"),
              std::string::npos)
        << e.what();
  }
}

// Files written before --min-lr existed ran every schedule down to 0.
TEST(Checkpoint, AnOlderFileWithoutMinLrEndedAtZero) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *written.model, written.sgd, somePosition(), {});
  loadCheckpoint(path, *restored.model, restored.sgd, {{"ddp.option.min-lr", "0"}});
  EXPECT_THROW(
      loadCheckpoint(path, *restored.model, restored.sgd, {{"ddp.option.min-lr", "0.001"}}),
      DataError);
}

// A file from before ddp.global_batch: the product of the options that made
// it, or 0 (not known) without them.
// Note [Keeping the best weights] in launcher/best_evaluation.h: the best
// evaluation (both results), its step, the metric that judged it,
// --early-stop's reference and the evaluations since come back bit for bit; a file without them
// (older, or written with neither --save-best nor --early-stop) has none.
TEST(Checkpoint, RecordsTheBestEvaluationSoFarWhenThereIsOne) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  TrainPosition at = somePosition();
  at.best.metric = BestMetric::kTestAccuracy;
  at.best.step = 40;
  at.best.testLoss = 0.3 + 0.01;
  at.best.testAccuracy = 0.7 + 0.1;
  at.best.testSamples = 512;
  at.best.evaluationsSince = 3;
  at.best.referenceStep = 30;
  at.best.referenceValue = 0.4 + 0.01;
  saveCheckpoint(path, *written.model, written.sgd, at, {});
  const TrainPosition back = loadCheckpoint(path, *restored.model, restored.sgd, {});
  EXPECT_EQ(back.best.metric, BestMetric::kTestAccuracy);
  EXPECT_EQ(back.best.step, 40u);
  EXPECT_EQ(back.best.testLoss, 0.3 + 0.01);
  EXPECT_EQ(back.best.testAccuracy, 0.7 + 0.1);
  EXPECT_EQ(back.best.testSamples, 512u);
  EXPECT_EQ(back.best.evaluationsSince, 3u);
  EXPECT_EQ(back.best.referenceStep, 30u);
  EXPECT_EQ(back.best.referenceValue, 0.4 + 0.01);
  saveCheckpoint(path, *written.model, written.sgd, somePosition(), {});
  const TrainPosition none = loadCheckpoint(path, *restored.model, restored.sgd, {});
  EXPECT_EQ(none.best.step, 0u);
  EXPECT_EQ(none.best.evaluationsSince, 0u);
  const auto metadata = checkpointMetadata(somePosition(), {});
  EXPECT_FALSE(metadata.contains("ddp.best_step"));
  EXPECT_FALSE(metadata.contains("ddp.best_metric"));
  EXPECT_FALSE(metadata.contains("ddp.early_stop_reference_step"));
}

// A checkpoint written before --best-metric recorded the lowest test loss
// and no accuracy: it reads as judged by the loss, its accuracy unknown. A
// metric of another name is refused.
TEST(Checkpoint, AnOlderBestRecordIsTheTestLossAndAnUnknownMetricIsRefused) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  TrainPosition at = somePosition();
  at.best.step = 40;
  at.best.testLoss = 0.25;
  at.best.testAccuracy = 0.5;
  std::map<std::string, std::string> metadata = checkpointMetadata(at, {});
  metadata.erase("ddp.best_metric");
  metadata.erase("ddp.best_test_accuracy");
  metadata.erase("ddp.best_test_samples");
  saveSafetensors(path, checkpointTensors(*written.model, written.sgd), metadata);
  const TrainPosition back = loadCheckpoint(path, *restored.model, restored.sgd, {});
  EXPECT_EQ(back.best.metric, BestMetric::kTestLoss);
  EXPECT_EQ(back.best.step, 40u);
  EXPECT_EQ(back.best.testLoss, 0.25);
  EXPECT_TRUE(std::isnan(back.best.testAccuracy));
  EXPECT_EQ(back.best.testSamples, 0u);
  EXPECT_EQ(back.best.referenceStep, 0u);  // BestEvaluation stands the best in
  metadata["ddp.best_metric"] = "val_acc";
  saveSafetensors(path, checkpointTensors(*written.model, written.sgd), metadata);
  try {
    loadCheckpoint(path, *restored.model, restored.sgd, {});
    FAIL() << "read an unknown metric";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'ddp.best_metric' is not a metric: 'val_acc'"),
              std::string::npos)
        << e.what();
  }
}

// Note [Where a model file's weights came from] in trainer/model_origin.h:
// what a model file records of its weights comes back through --init-from's
// loadWeights, bit for bit; a file from another writer records nothing, and
// a malformed entry is refused naming it.
TEST(Checkpoint, AModelFileRecordsWhereItsWeightsCameFrom) {
  TempDir dir;
  TrainedModel written(1);
  ModelOrigin origin;
  origin.step = 40;
  origin.savedBy = "--save-best";
  origin.chosenBy = BestMetric::kTestAccuracy;
  origin.evaluation = EvalResult{0.1 + 0.2, 0.7 + 0.1, 500};
  const std::string path = dir.file("best.safetensors");
  saveModel(path, *written.model, originMetadata(origin));
  auto fresh = buildMlp(3, {4}, 2, 2);
  const WeightsSource source = loadWeights(path, *fresh);
  EXPECT_FALSE(source.checkpointStep);
  ASSERT_TRUE(source.origin);
  EXPECT_EQ(source.origin->step, 40u);
  EXPECT_EQ(source.origin->savedBy, "--save-best");
  EXPECT_EQ(source.origin->chosenBy, BestMetric::kTestAccuracy);
  ASSERT_TRUE(source.origin->evaluation);
  EXPECT_EQ(source.origin->evaluation->loss, 0.1 + 0.2);
  EXPECT_EQ(source.origin->evaluation->accuracy, 0.7 + 0.1);
  EXPECT_EQ(source.origin->evaluation->samples, 500u);
  EXPECT_EQ(originText(*source.origin),
            "the weights of step 40 (--save-best by test_accuracy; evaluated then: test_loss "
            "0.3000, test_acc 80.00% on 500 samples)");
  EXPECT_EQ(loadSafetensors(path).metadata.at("format"), "pt");  // still PyTorch's

  ModelOrigin last;
  last.step = 7;
  last.savedBy = "--save-model";
  saveModel(path, *written.model, originMetadata(last));
  const std::optional<ModelOrigin> back = loadWeights(path, *fresh).origin;
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->evaluation);
  EXPECT_FALSE(back->chosenBy);
  EXPECT_EQ(originText(*back), "the weights of step 7 (--save-model)");

  saveModel(path, *written.model);
  EXPECT_FALSE(loadWeights(path, *fresh).origin);
  std::map<std::string, std::string> metadata = originMetadata(origin);
  metadata["ddp.step"] = "-1";
  saveModel(path, *written.model, metadata);
  try {
    loadWeights(path, *fresh);
    FAIL() << "read a malformed step";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("metadata entry 'ddp.step' is malformed: '-1'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, AnOlderFileWithoutTheGlobalBatchHasItsOptionsProduct) {
  TempDir dir;
  TrainedModel written(1), restored(2);
  TrainPosition at = somePosition();
  at.globalBatch = 0;  // not written
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *written.model, written.sgd, at,
                 {{"ddp.option.batch-size", "16"}, {"ddp.option.grad-accum", "3"}});
  ASSERT_FALSE(loadSafetensors(path).metadata.contains("ddp.global_batch"));
  EXPECT_EQ(loadCheckpoint(path, *restored.model, restored.sgd, {}).globalBatch, 16u * 3 * 2);
  saveCheckpoint(path, *written.model, written.sgd, at, {});
  EXPECT_EQ(loadCheckpoint(path, *restored.model, restored.sgd, {}).globalBatch, 0u);
}

TEST(Checkpoint, CompleteOnesAreOrderedByStepNotByName) {
  TempDir dir;
  TrainedModel run(1);
  // 1000000000 sorts before 999999999 as a name.
  for (std::size_t step : {9, 999999999, 1000000000})
    saveCheckpoint(checkpointPath(dir.file(""), step), *run.model, run.sgd, somePosition(), {});
  std::ofstream(dir.file("checkpoint-000000200.safetensors.tmp.123")) << "partial";
  const auto all = completeCheckpoints(dir.file(""));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], checkpointPath(dir.file(""), 9));
  EXPECT_EQ(all[2], checkpointPath(dir.file(""), 1000000000));
}

TEST(Checkpoint, PruningKeepsTheNewestAndLeavesOtherRunsAndPartialFiles) {
  TempDir dir;
  TrainedModel run(1);
  const auto at = [&](std::size_t step) { return checkpointPath(dir.file(""), step); };
  for (std::size_t step : {10, 20, 30, 40, 500})  // 500: another run's, in the same directory
    saveCheckpoint(at(step), *run.model, run.sgd, somePosition(), {});
  std::ofstream(dir.file("checkpoint-000000005.safetensors.tmp.77")) << "partial";
  std::ofstream(dir.file("checkpoint-000000001.safetensors.damaged")) << "moved aside";

  std::vector<std::string> failed;
  EXPECT_EQ(pruneCheckpoints(dir.file(""), 40, 2, &failed),
            (std::vector<std::string>{at(10), at(20)}));
  EXPECT_TRUE(failed.empty());
  EXPECT_EQ(completeCheckpoints(dir.file("")), (std::vector<std::string>{at(30), at(40), at(500)}));
  EXPECT_TRUE(std::filesystem::exists(dir.file("checkpoint-000000005.safetensors.tmp.77")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("checkpoint-000000001.safetensors.damaged")));

  EXPECT_EQ(pruneCheckpoints(dir.file(""), 40, 1, &failed), (std::vector<std::string>{at(30)}));
  EXPECT_TRUE(pruneCheckpoints(dir.file(""), 40, 1, &failed).empty());  // nothing older left
  EXPECT_EQ(completeCheckpoints(dir.file("")), (std::vector<std::string>{at(40), at(500)}));
}

// Both stagings (Note [Checkpoints written in the background]).
class CheckpointWriterTest : public ::testing::TestWithParam<CheckpointStaging> {};

std::string stagingName(const ::testing::TestParamInfo<CheckpointStaging>& info) {
  return info.param == CheckpointStaging::kCopy ? "Copy" : "Direct";
}

TEST_P(CheckpointWriterTest, WritesTheStateAtTheCallWhileTrainingChangesIt) {
  TempDir dir;
  TrainedModel run(1), check(2);
  const std::vector<float> before(run.model->parameters()[0]->value.data(),
                                  run.model->parameters()[0]->value.data() + 4);
  std::vector<std::string> written;  // only the writer thread appends, finish() orders the read
  {
    CheckpointWriter writer(
        [&](const std::string& path, const TrainPosition&) { written.push_back(path); },
        GetParam());
    writer.write(checkpointPath(dir.file(""), 1), *run.model, run.sgd, somePosition(), {});
    for (Parameter* p : run.model->parameters())  // the next steps, while it writes
      p->value.fill(7.0f);
    run.sgd.momentumBuffers()[0].fill(3.0f);
    writer.write(checkpointPath(dir.file(""), 2), *run.model, run.sgd, somePosition(), {});
    writer.finish();
    EXPECT_EQ(written, (std::vector<std::string>{checkpointPath(dir.file(""), 1),
                                                 checkpointPath(dir.file(""), 2)}));
  }
  loadCheckpoint(checkpointPath(dir.file(""), 1), *check.model, check.sgd, {});
  for (std::size_t j = 0; j < before.size(); ++j)
    EXPECT_EQ(check.model->parameters()[0]->value.data()[j], before[j]);
  EXPECT_NE(check.sgd.momentumBuffers()[0].data()[0], 3.0f);
  loadCheckpoint(checkpointPath(dir.file(""), 2), *check.model, check.sgd, {});
  EXPECT_EQ(check.model->parameters()[0]->value.data()[0], 7.0f);
  EXPECT_EQ(check.sgd.momentumBuffers()[0].data()[0], 3.0f);
}

// An optimizer whose one state slot is a snapshot made for the checkpoint,
// as a sharded optimizer's gathered state is (OptimizerState::snapshot).
class SnapshotOptimizer final : public Optimizer {
 public:
  explicit SnapshotOptimizer(const Parameter& p) : parameter_(&p) {}
  void step(const StepInputs&) override {}
  float learningRate() const override { return 0.1f; }
  void setLearningRate(float) override {}
  std::vector<OptimizerState> state() override {
    return {{"momentum." + parameter_->name, &gathered, parameter_->value.shape(), Device::kCpu,
             parameter_, true}};
  }
  const char* name() const override { return "sgd"; }
  Tensor gathered;

 private:
  const Parameter* parameter_;
};

// Note [Checkpoints written in the background]: the snapshot is kept, not
// copied (the writer holds its memory after the optimizer let go of it),
// written as it was, and let go of once written.
TEST_P(CheckpointWriterTest, KeepsASnapshotInsteadOfCopyingItAndLetsGoOnceWritten) {
  TempDir dir;
  auto model = buildMlp(3, {4}, 2, 1);
  const Parameter& first = *model->parameters()[0];
  SnapshotOptimizer optimizer(first);
  auto memory = std::make_shared<std::vector<float>>(first.value.numel(), 0.25f);
  const std::weak_ptr<std::vector<float>> watch = memory;
  optimizer.gathered = Tensor::view(memory->data(), first.value.shape(), memory);
  memory.reset();
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  CheckpointWriter writer(
      [&](const std::string&, const TrainPosition&) {
        entered.set_value();
        released.wait();
      },
      GetParam());
  const std::string path = checkpointPath(dir.file(""), 5);
  writer.write(path, *model, optimizer, somePosition(), {});
  optimizer.gathered = Tensor();  // releaseGatheredState
  entered.get_future().wait();    // written, not yet let go of
  EXPECT_FALSE(watch.expired()) << "the writer copied the snapshot instead of keeping it";
  release.set_value();
  writer.finish();
  EXPECT_TRUE(watch.expired()) << "the writer kept the snapshot after writing it";
  const SafetensorsFile file = loadSafetensors(path);
  const Tensor& written = file.tensors.at("optimizer.momentum." + first.name);
  for (std::size_t i = 0; i < written.numel(); ++i)
    ASSERT_EQ(written.data()[i], 0.25f);
}

// A write that fails on the thread (here the handler run once the file is
// in place, whose throw counts as a failed write) is rethrown once, by the
// next call; one that cannot even create its file, at once.
TEST_P(CheckpointWriterTest, AFailedWriteIsRethrownOnceThenWritingGoesOn) {
  TempDir dir;
  TrainedModel run(1);
  int calls = 0;
  CheckpointWriter writer(
      [&](const std::string&, const TrainPosition&) {
        if (++calls == 1) throw DataError("the first handler call fails");
      },
      GetParam());
  writer.write(checkpointPath(dir.file(""), 1), *run.model, run.sgd, somePosition(), {});
  try {
    writer.finish();
    FAIL() << "a failed write was not reported";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "the first handler call fails");
  }
  writer.finish();  // reported once
  try {
    writer.write(dir.file("no-such-dir/checkpoint.safetensors"), *run.model, run.sgd,
                 somePosition(), {});
    FAIL() << "a file that cannot be created was not reported";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir/checkpoint.safetensors: cannot create"),
              std::string::npos)
        << e.what();
  }
  writer.write(checkpointPath(dir.file(""), 3), *run.model, run.sgd, somePosition(), {});
  writer.finish();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(
      completeCheckpoints(dir.file("")),
      (std::vector<std::string>{checkpointPath(dir.file(""), 1), checkpointPath(dir.file(""), 3)}));
}

std::string bytesOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Note [Writing a file in parts]: whichever way it is staged, the file is
// saveCheckpoint's, byte for byte.
TEST_P(CheckpointWriterTest, WritesTheFileSaveCheckpointWrites) {
  TempDir dir;
  TrainedModel run(1);
  saveCheckpoint(dir.file("inline"), *run.model, run.sgd, somePosition(), {{"ddp.option.a", "1"}});
  CheckpointWriter writer([](const std::string&, const TrainPosition&) {}, GetParam());
  writer.write(dir.file("background"), *run.model, run.sgd, somePosition(),
               {{"ddp.option.a", "1"}});
  writer.finish();
  const std::string expected = bytesOf(dir.file("inline"));
  ASSERT_GT(expected.size(), 100u);
  EXPECT_EQ(bytesOf(dir.file("background")), expected);
}

// What rank 0 holds while a checkpoint is written: kCopy a copy of the
// 64 MiB checkpoint (weights and momentum), kDirect none of it, beyond one
// piece read back for the checksums. The peak (VmHWM) is reset first.
TEST_P(CheckpointWriterTest, DirectHoldsNoCopyOfTheCheckpoint) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizers' shadow memory and quarantine grow the peak";
#endif
  TempDir dir;
  auto model = buildMlp(1024, {2048, 2048, 1024}, 10, 1);  // 8.4 M parameters: 32 MiB
  Sgd sgd(model->parameters(), {0.1f, 0.9f, 0.0f, false});
  for (Parameter* p : model->parameters())
    p->grad.fill(0.5f);
  sgd.step();  // the momentum exists and is resident
  CheckpointWriter writer([](const std::string&, const TrainPosition&) {}, GetParam());
  if (!ddp::testing::resetResidentPeak())
    GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak here";
  const std::size_t before = statusBytes("VmRSS:");
  writer.write(dir.file("c"), *model, sgd, somePosition(), {});
  writer.finish();
  const double grownMiB = static_cast<double>(statusBytes("VmHWM:") - before) / (1 << 20);
  if (GetParam() == CheckpointStaging::kCopy) {
    EXPECT_GT(grownMiB, 60.0);
  } else {
    EXPECT_LT(grownMiB, 12.0);
  }
  RecordProperty("peak_growth_mib", std::to_string(grownMiB));
  auto check = buildMlp(1024, {2048, 2048, 1024}, 10, 2);
  Sgd checkSgd(check->parameters(), {0.1f, 0.9f, 0.0f, false});
  loadCheckpoint(dir.file("c"), *check, checkSgd, {});
  EXPECT_EQ(check->parameters()[2]->value.data()[5], model->parameters()[2]->value.data()[5]);
}

INSTANTIATE_TEST_SUITE_P(Staging, CheckpointWriterTest,
                         ::testing::Values(CheckpointStaging::kCopy, CheckpointStaging::kDirect),
                         stagingName);

// An optimizer whose state is spread over ranks, as a sharded optimizer's
// (OptimizerState::onShards): gatherState makes it whole, streamState hands
// it over in three pieces, the last first, and counts its calls.
class ShardedStateOptimizer final : public Optimizer {
 public:
  explicit ShardedStateOptimizer(const Parameter& p) : parameter_(&p), values_(p.value.numel()) {
    for (std::size_t i = 0; i < values_.size(); ++i)
      values_[i] = 0.25f * static_cast<float>(i) - 1.0f;
  }
  void step(const StepInputs&) override {}
  float learningRate() const override { return 0.1f; }
  void setLearningRate(float) override {}
  std::vector<OptimizerState> state() override {
    return {{"momentum." + parameter_->name, &gathered, parameter_->value.shape(), Device::kCpu,
             parameter_, true, true}};
  }
  const char* name() const override { return "sgd"; }
  bool sharded() const override { return true; }
  void gatherState(int) override {
    gathered = Tensor(parameter_->value.shape());
    std::copy(values_.begin(), values_.end(), gathered.data());
  }
  void releaseGatheredState() override { gathered = Tensor(); }
  void streamState(int, const StatePieceSink& deliver) override {
    ++streams;
    const std::size_t n = values_.size(), third = n / 3;
    const std::pair<std::size_t, std::size_t> pieces[] = {
        {2 * third, n}, {0, third}, {third, 2 * third}};
    for (const auto& [begin, end] : pieces)
      deliver(0, begin, std::span<const float>(values_.data() + begin, end - begin));
  }
  Tensor gathered;
  int streams = 0;

 private:
  const Parameter* parameter_;
  std::vector<float> values_;
};

// Note [Streaming a sharded optimizer's state]: written directly, a sharded
// optimizer's state goes into the file piece by piece as it arrives, never
// gathered, and the file is the one the copy writes from the gathered
// state. Where the file cannot even be created, rank 0 still takes part in
// the stream (the other ranks are in it), and throws after. The copy, given
// state neither gathered nor streamed, refuses it.
TEST(CheckpointWriter, StreamsAShardedOptimizersStateIntoAFileWrittenDirectly) {
  TempDir dir;
  auto model = buildMlp(3, {4}, 2, 1);
  ShardedStateOptimizer optimizer(*model->parameters()[0]);
  const auto ignore = [](const std::string&, const TrainPosition&) {};
  CheckpointWriter copy(ignore, CheckpointStaging::kCopy);
  optimizer.gatherState(0);
  copy.write(dir.file("copy"), *model, optimizer, somePosition(), {});
  optimizer.releaseGatheredState();
  copy.finish();
  EXPECT_EQ(optimizer.streams, 0);

  CheckpointWriter direct(ignore, CheckpointStaging::kDirect);
  direct.write(dir.file("direct"), *model, optimizer, somePosition(), {});
  EXPECT_EQ(optimizer.streams, 1);
  EXPECT_TRUE(optimizer.gathered.empty());
  direct.finish();
  const std::string expected = bytesOf(dir.file("copy"));
  ASSERT_GT(expected.size(), 100u);
  EXPECT_EQ(bytesOf(dir.file("direct")), expected);

  try {
    direct.write(dir.file("no-such-dir/c.safetensors"), *model, optimizer, somePosition(), {});
    FAIL() << "a file that cannot be created was not reported";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
  EXPECT_EQ(optimizer.streams, 2) << "rank 0 left the stream the other ranks are in";
  EXPECT_THROW(copy.write(dir.file("ungathered"), *model, optimizer, somePosition(), {}),
               InternalError);
}

TEST(Checkpoint, WithoutChecksumsIsRefusedBeforeAnythingIsLoaded) {
  TempDir dir;
  TrainedModel written(1), target(2);
  const std::string path = checkpointPath(dir.file(""), 70);
  saveCheckpoint(path, *written.model, written.sgd, somePosition(), {});
  SafetensorsFile file = loadSafetensors(path);
  ASSERT_TRUE(file.checksummed);
  file.checksummed = false;  // what a file rewritten without them reads as
  const float before = target.model->parameters()[0]->value.data()[0];
  try {
    restoreCheckpoint(path, file, *target.model, target.sgd, {});
    FAIL() << "restored a checkpoint without checksums";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("carries no checksums"), std::string::npos) << e.what();
  }
  EXPECT_EQ(target.model->parameters()[0]->value.data()[0], before);
}

}  // namespace
}  // namespace ddp::trainer
