// Where the weights of a model file ddp wrote came from.
//
// Note [Where a model file's weights came from]
// A model file outlives the log of the run that wrote it: best.safetensors,
// found weeks later, should still say which step it holds and which
// evaluation chose it. So every model file ddp writes (--save-model,
// --save-best) records, as metadata that other readers ignore (PyTorch's
// safetensors.torch.load_file returns the tensors alone):
//   * `ddp.step`: the global step the weights were trained to (absent where
//     not known: --evaluate of another program's file);
//   * `ddp.saved_by`: the option that wrote it ("--save-best");
//   * `ddp.best_metric`: for --save-best, what "best" was judged by;
//   * `ddp.test_loss`, `ddp.test_accuracy`, `ddp.test_samples`: when the
//     weights were evaluated just before they were written (each
//     --save-best, --evaluate, a run that ended with an evaluation), that
//     evaluation, the doubles to 17 significant digits.
// --init-from and --evaluate report them. They are covered by the file's
// checksums (Note [Checksums in safetensors files]) like any metadata.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "trainer/evaluation.h"

namespace ddp::trainer {

struct ModelOrigin {
  std::optional<std::size_t> step;
  std::string savedBy;                 // "--save-model", "--save-best"
  std::optional<BestMetric> chosenBy;  // --save-best's metric
  std::optional<EvalResult> evaluation;
};

// The metadata entries that record `origin`, for saveModel.
std::map<std::string, std::string> originMetadata(const ModelOrigin& origin);

// The origin a model file's `metadata` records; nullopt for a file without
// one (another program's, or written before ddp recorded it). Throws
// DataError naming `path` and the entry when one is malformed.
std::optional<ModelOrigin> recordedOrigin(const std::string& path,
                                          const std::map<std::string, std::string>& metadata);

// "the weights of step 40 (--save-best by test_loss; evaluated then:
// test_loss 0.3631, test_acc 87.10% on 2000 samples)"
std::string originText(const ModelOrigin& origin);

}  // namespace ddp::trainer
