#include "trainer/model_origin.h"

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/safetensors.h"

namespace ddp::trainer {

std::map<std::string, std::string> originMetadata(const ModelOrigin& origin) {
  std::map<std::string, std::string> metadata;
  if (origin.step) metadata["ddp.step"] = str(*origin.step);
  if (!origin.savedBy.empty()) metadata["ddp.saved_by"] = origin.savedBy;
  if (origin.chosenBy) metadata["ddp.best_metric"] = bestMetricName(*origin.chosenBy);
  if (origin.evaluation) {
    metadata["ddp.test_loss"] = significant(origin.evaluation->loss, kExactDigits);
    metadata["ddp.test_accuracy"] = significant(origin.evaluation->accuracy, kExactDigits);
    metadata["ddp.test_samples"] = str(origin.evaluation->samples);
  }
  return metadata;
}

std::optional<ModelOrigin> recordedOrigin(const std::string& path,
                                          const std::map<std::string, std::string>& metadata) {
  if (!metadata.contains("ddp.saved_by")) return std::nullopt;
  ModelOrigin origin;
  origin.savedBy = metadata.at("ddp.saved_by");
  if (metadata.contains("ddp.step")) origin.step = metadataCount(path, metadata, "ddp.step");
  if (const auto metric = metadata.find("ddp.best_metric"); metric != metadata.end()) {
    origin.chosenBy = parseBestMetric(metric->second);
    if (!origin.chosenBy) {
      throw DataError(
          str(path, ": metadata entry 'ddp.best_metric' is malformed: '", metric->second, "'"));
    }
  }
  if (metadata.contains("ddp.test_loss")) {
    EvalResult evaluation;
    evaluation.loss = metadataReal(path, metadata, "ddp.test_loss");
    evaluation.accuracy = metadataReal(path, metadata, "ddp.test_accuracy");
    evaluation.samples = metadataCount(path, metadata, "ddp.test_samples");
    origin.evaluation = evaluation;
  }
  return origin;
}

std::string originText(const ModelOrigin& origin) {
  std::string text = origin.step ? str("the weights of step ", *origin.step)
                                 : std::string("weights of an unrecorded step");
  std::string how = origin.savedBy;
  if (origin.chosenBy) how += str(" by ", bestMetricName(*origin.chosenBy));
  if (origin.evaluation) {
    const EvalResult& e = *origin.evaluation;
    how += str("; evaluated then: test_loss ", fixedOrExponent(e.loss, 4), ", test_acc ",
               fixed(100.0 * e.accuracy, 2), "% on ", e.samples, " samples");
  }
  return how.empty() ? text : str(text, " (", how, ")");
}

}  // namespace ddp::trainer
