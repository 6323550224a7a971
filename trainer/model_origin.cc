#include "trainer/model_origin.h"

#include <exception>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::trainer {
namespace {

// The entry `key` of `metadata`, read by `parse` (std::stoull, std::stod),
// which must take all of it.
template <typename Parse>
auto parseEntry(const std::string& path, const std::map<std::string, std::string>& metadata,
                const std::string& key, Parse parse) {
  const std::string& text = metadata.at(key);
  try {
    std::size_t used = 0;
    const auto value = parse(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw DataError(str(path, ": metadata entry '", key, "' is malformed: '", text, "'"));
}

std::size_t parseCount(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::string& key) {
  return static_cast<std::size_t>(
      parseEntry(path, metadata, key, [](const std::string& s, std::size_t* used) {
        if (s.empty() || s[0] == '-') throw std::invalid_argument(s);  // stoull wraps negatives
        return std::stoull(s, used);
      }));
}

double parseReal(const std::string& path, const std::map<std::string, std::string>& metadata,
                 const std::string& key) {
  return parseEntry(path, metadata, key,
                    [](const std::string& s, std::size_t* used) { return std::stod(s, used); });
}

}  // namespace

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
  if (metadata.contains("ddp.step")) origin.step = parseCount(path, metadata, "ddp.step");
  if (const auto metric = metadata.find("ddp.best_metric"); metric != metadata.end()) {
    origin.chosenBy = parseBestMetric(metric->second);
    if (!origin.chosenBy) {
      throw DataError(
          str(path, ": metadata entry 'ddp.best_metric' is malformed: '", metric->second, "'"));
    }
  }
  if (metadata.contains("ddp.test_loss")) {
    EvalResult evaluation;
    evaluation.loss = parseReal(path, metadata, "ddp.test_loss");
    evaluation.accuracy = parseReal(path, metadata, "ddp.test_accuracy");
    evaluation.samples = parseCount(path, metadata, "ddp.test_samples");
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
    how += str("; evaluated then: test_loss ", fixed(e.loss, 4), ", test_acc ",
               fixed(100.0 * e.accuracy, 2), "% on ", e.samples, " samples");
  }
  return how.empty() ? text : str(text, " (", how, ")");
}

}  // namespace ddp::trainer
