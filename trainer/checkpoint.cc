#include "trainer/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <vector>

#include "runtime/error.h"
#include "trainer/safetensors.h"

namespace ddp::trainer {
namespace {

// Note [Optimizer state in checkpoints] in trainer/optimizer.h.
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kFormat = "ddp-checkpoint-1";

// ddp.global_batch, or for a file written before it was recorded, the
// product of the options that made it; 0 if neither is there.
std::size_t recordedGlobalBatch(const std::string& path,
                                const std::map<std::string, std::string>& meta, int worldSize) {
  if (meta.contains("ddp.global_batch")) return metadataCount(path, meta, "ddp.global_batch");
  if (!meta.contains("ddp.option.batch-size") || !meta.contains("ddp.option.grad-accum")) return 0;
  return metadataCount(path, meta, "ddp.option.batch-size") *
         metadataCount(path, meta, "ddp.option.grad-accum") * static_cast<std::size_t>(worldSize);
}

// The record of a checkpoint written with --save-best or --early-stop; a
// default one (nothing yet) for any other. Files written before
// ddp.best_metric judged by the test loss and recorded no accuracy.
BestRecord recordedBest(const std::string& path, const std::map<std::string, std::string>& meta) {
  BestRecord best;
  best.testAccuracy = std::nan("");
  if (const auto metric = meta.find("ddp.best_metric"); metric != meta.end()) {
    const std::optional<BestMetric> parsed = parseBestMetric(metric->second);
    if (!parsed) {
      throw DataError(str(path, ": checkpoint field 'ddp.best_metric' is not a metric: '",
                          metric->second, "'"));
    }
    best.metric = *parsed;
  }
  if (meta.contains("ddp.evaluations_since_best"))
    best.evaluationsSince = metadataCount(path, meta, "ddp.evaluations_since_best");
  if (meta.contains("ddp.best_step")) {
    best.step = metadataCount(path, meta, "ddp.best_step");
    best.testLoss = metadataReal(path, meta, "ddp.best_test_loss");
    if (meta.contains("ddp.best_test_accuracy") || best.metric != BestMetric::kTestLoss)
      best.testAccuracy = metadataReal(path, meta, "ddp.best_test_accuracy");
    if (meta.contains("ddp.best_test_samples"))
      best.testSamples = metadataCount(path, meta, "ddp.best_test_samples");
  }
  if (meta.contains("ddp.early_stop_reference_step")) {
    best.referenceStep = metadataCount(path, meta, "ddp.early_stop_reference_step");
    best.referenceValue = metadataReal(path, meta, "ddp.early_stop_reference");
  }
  return best;
}

// The metadata keys of the options a checkpoint records (launcher/run_config.h).
constexpr const char* kOptionPrefix = "ddp.option.";

// Options that older checkpoints do not record, with the value they ran
// with: such a file resumes under that value and no other.
const std::map<std::string, std::string> kAddedOptions = {
    {"ddp.option.optimizer", "sgd"}, {"ddp.option.no-bias-decay", "0"}, {"ddp.option.min-lr", "0"}};

// Checks the optimizer's tensors in `file` against what `optimizer` keeps
// (Note [Optimizer state in checkpoints]): each a known name with its
// shape, and all of them or none. Returns how many the file holds.
std::size_t checkOptimizerState(const std::string& path, const SafetensorsFile& file,
                                const char* optimizer, const std::vector<OptimizerState>& slots) {
  std::map<std::string, const OptimizerState*> known;
  for (const OptimizerState& slot : slots)
    known.emplace(kOptimizerPrefix + slot.name, &slot);
  std::size_t held = 0;
  std::string missing;
  for (const auto& [name, tensor] : file.tensors) {
    if (!name.starts_with(kOptimizerPrefix)) continue;
    const auto it = known.find(name);
    if (it == known.end()) {
      throw DataError(str(path, ": holds optimizer state '", name, "', which ", optimizer,
                          " does not keep (the checkpoint is damaged or from another program)"));
    }
    if (tensor.shape() != it->second->shape) {
      throw DataError(str(path, ": optimizer state '", name, "' has shape ",
                          shapeString(tensor.shape()), " but ", optimizer, "'s is ",
                          shapeString(it->second->shape)));
    }
    ++held;
  }
  if (held == 0 || held == known.size()) return held;
  for (const auto& [name, slot] : known) {
    if (!file.tensors.contains(name)) {
      missing = name;
      break;
    }
  }
  throw DataError(str(path, ": holds ", held, " of ", optimizer, "'s ", known.size(),
                      " optimizer state tensors (no '", missing,
                      "'): all or none, so the file is damaged"));
}

}  // namespace

std::string checkpointPath(const std::string& dir, std::size_t globalStep) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%09zu.safetensors", globalStep);
  return (std::filesystem::path(dir) / name).string();
}

std::vector<CheckpointEntry> checkpointEntries(Sequential& model, Optimizer& optimizer) {
  std::vector<CheckpointEntry> entries;
  for (Parameter* p : model.parameters())
    entries.push_back({p->name, p->value.shape(), &p->value, std::nullopt});
  const std::vector<OptimizerState> slots = optimizer.state();
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].tensor->empty() && !slots[i].onShards) continue;  // not created yet
    const Tensor& tensor = *slots[i].tensor;
    entries.push_back({kOptimizerPrefix + slots[i].name,
                       tensor.empty() ? slots[i].shape : tensor.shape(), &tensor, i});
  }
  return entries;
}

std::vector<std::pair<std::string, const Tensor*>> checkpointTensors(Sequential& model,
                                                                     Optimizer& optimizer) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const CheckpointEntry& entry : checkpointEntries(model, optimizer)) {
    if (!entry.tensor->empty()) tensors.emplace_back(entry.name, entry.tensor);
  }
  return tensors;
}

std::map<std::string, std::string> checkpointMetadata(const TrainPosition& position,
                                                      const CheckpointOptions& options) {
  std::map<std::string, std::string> meta = options;
  meta["format"] = "pt";  // what safetensors.torch expects
  meta["ddp.format"] = kFormat;
  meta["ddp.epoch"] = str(position.epoch);
  meta["ddp.consumed"] = str(position.consumed);
  meta["ddp.global_step"] = str(position.globalStep);
  meta["ddp.world_size"] = str(position.worldSize);
  meta["ddp.epoch_steps"] = str(position.epochSteps);
  if (position.globalBatch > 0) meta["ddp.global_batch"] = str(position.globalBatch);
  meta["ddp.epoch_loss_sum"] = significant(position.epochLossSum, kExactDigits);
  const BestRecord& best = position.best;
  if (best.step > 0) {
    meta["ddp.best_step"] = str(best.step);
    meta["ddp.best_test_loss"] = significant(best.testLoss, kExactDigits);
    meta["ddp.best_test_accuracy"] = significant(best.testAccuracy, kExactDigits);
    meta["ddp.best_test_samples"] = str(best.testSamples);
  }
  if (best.referenceStep > 0) {
    meta["ddp.early_stop_reference_step"] = str(best.referenceStep);
    meta["ddp.early_stop_reference"] = significant(best.referenceValue, kExactDigits);
  }
  // The name is older than --early-stop-min-delta: with none, the reference
  // is the best.
  if (best.evaluationsSince > 0) meta["ddp.evaluations_since_best"] = str(best.evaluationsSince);
  if (best.step > 0 || best.evaluationsSince > 0)
    meta["ddp.best_metric"] = bestMetricName(best.metric);
  return meta;
}

void saveCheckpoint(const std::string& path, Sequential& model, Optimizer& optimizer,
                    const TrainPosition& position, const CheckpointOptions& options) {
  saveSafetensors(path, checkpointTensors(model, optimizer), checkpointMetadata(position, options));
}

TrainPosition loadCheckpoint(const std::string& path, Sequential& model, Optimizer& optimizer,
                             const CheckpointOptions& expected) {
  return restoreCheckpoint(path, loadSafetensors(path), model, optimizer, expected);
}

std::vector<std::pair<std::string, const Tensor*>> checkpointWeights(const std::string& path,
                                                                     const SafetensorsFile& file,
                                                                     Sequential& model) {
  checkHoldsModel(path, file, model, kOptimizerPrefix);
  std::vector<std::pair<std::string, const Tensor*>> weights;
  for (Parameter* p : model.parameters())
    weights.emplace_back(p->name, &file.tensors.at(p->name));
  return weights;
}

WeightsSource loadWeights(const std::string& path, Sequential& model) {
  const SafetensorsFile file = loadSafetensors(path);
  const auto format = file.metadata.find("ddp.format");
  const bool checkpoint = format != file.metadata.end() && format->second == kFormat;
  checkHoldsModel(path, file, model, checkpoint ? kOptimizerPrefix : "");
  for (Parameter* p : model.parameters())
    file.copyInto(p->name, p->value);
  WeightsSource source;
  source.converted = file.converted;
  if (checkpoint)
    source.checkpointStep = metadataCount(path, file.metadata, "ddp.global_step");
  else
    source.origin = recordedOrigin(path, file.metadata);
  return source;
}

CheckedCheckpoint checkCheckpoint(const std::string& path, const SafetensorsFile& file,
                                  Sequential& model, Optimizer& optimizer,
                                  const CheckpointOptions& expected) {
  const auto& meta = file.metadata;
  const auto format = meta.find("ddp.format");
  if (format == meta.end() || format->second != kFormat) {
    throw DataError(str(path, ": not a ddp checkpoint (no ddp.format = ", kFormat,
                        "; weights alone load with --init-from)"));
  }
  if (!file.checksummed) {
    throw DataError(str(path,
                        ": the checkpoint carries no checksums (its metadata was damaged, or "
                        "another program rewrote it)"));
  }
  // Every option that differs, so that one rerun can fix them all.
  std::string differences;
  for (const auto& [key, value] : expected) {
    const auto it = meta.find(key);
    const auto older = kAddedOptions.find(key);
    const std::string recorded = it != meta.end()               ? it->second
                                 : older != kAddedOptions.end() ? older->second
                                                                : std::string("(none)");
    if (recorded == value) continue;
    const std::string name =
        key.starts_with(kOptionPrefix) ? "--" + key.substr(std::strlen(kOptionPrefix)) : key;
    differences +=
        str(differences.empty() ? "" : ", ", name, " '", recorded, "' (this run: '", value, "')");
  }
  if (!differences.empty()) {
    throw DataError(str(path, ": was written with other options than this run's: ", differences,
                        ". A resume goes on with the options the run was written with; to start "
                        "a new run from these weights, use --init-from ",
                        path));
  }
  TrainPosition position;
  position.epoch = metadataCount(path, meta, "ddp.epoch");
  position.consumed = metadataCount(path, meta, "ddp.consumed");
  position.globalStep = metadataCount(path, meta, "ddp.global_step");
  position.worldSize = static_cast<int>(metadataCount(path, meta, "ddp.world_size"));
  position.epochSteps = metadataCount(path, meta, "ddp.epoch_steps");
  position.globalBatch = recordedGlobalBatch(path, meta, position.worldSize);
  position.epochLossSum = metadataReal(path, meta, "ddp.epoch_loss_sum");
  position.best = recordedBest(path, meta);
  if (position.epoch == 0 || position.worldSize <= 0) {
    throw DataError(str(path, ": checkpoint position is invalid (epoch ", position.epoch,
                        ", world size ", position.worldSize, ")"));
  }

  checkHoldsModel(path, file, model, kOptimizerPrefix);
  const std::size_t held = checkOptimizerState(path, file, optimizer.name(), optimizer.state());
  return {position, held > 0};
}

TrainPosition restoreCheckpoint(const std::string& path, const SafetensorsFile& file,
                                Sequential& model, Optimizer& optimizer,
                                const CheckpointOptions& expected) {
  // Validate everything before copying anything.
  const CheckedCheckpoint checked = checkCheckpoint(path, file, model, optimizer, expected);
  for (Parameter* p : model.parameters())
    file.copyInto(p->name, p->value);
  if (!checked.holdsState) {
    optimizer.clearState();
    return checked.position;
  }
  for (const OptimizerState& slot : optimizer.state()) {
    const std::span<const float> values = checkpointTensor(file, slot).span();
    optimizer.restoreState(slot, 0, values);
    file.release(values);
  }
  return checked.position;
}

const Tensor& checkpointTensor(const SafetensorsFile& file, const OptimizerState& slot) {
  return file.tensors.at(kOptimizerPrefix + slot.name);
}

namespace {

// The complete checkpoints in `dir` with their steps, oldest first.
std::vector<std::pair<unsigned long long, std::string>> checkpointsByStep(const std::string& dir) {
  static const std::regex kPattern(R"(checkpoint-(\d{9,})\.safetensors)");
  std::error_code error;
  std::vector<std::pair<unsigned long long, std::string>> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !std::regex_match(name, match, kPattern)) continue;
    found.emplace_back(std::stoull(match[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<std::string> completeCheckpoints(const std::string& dir) {
  std::vector<std::string> paths;
  for (auto& [step, path] : checkpointsByStep(dir))
    paths.push_back(std::move(path));
  return paths;
}

std::vector<std::string> pruneCheckpoints(const std::string& dir, std::size_t writtenStep,
                                          std::size_t keep, std::vector<std::string>* failed) {
  std::vector<std::string> older;
  for (auto& [step, path] : checkpointsByStep(dir)) {
    if (step < writtenStep) older.push_back(std::move(path));
  }
  const std::size_t kept = keep == 0 ? older.size() : std::min(older.size(), keep - 1);
  std::vector<std::string> deleted;
  for (std::size_t i = 0; i + kept < older.size(); ++i) {
    std::error_code error;
    if (std::filesystem::remove(older[i], error)) {
      deleted.push_back(older[i]);
    } else if (failed != nullptr) {
      failed->push_back(older[i]);
    }
  }
  return deleted;
}

}  // namespace ddp::trainer
