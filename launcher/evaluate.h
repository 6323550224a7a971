// --evaluate: the weights of a model file or of a checkpoint, evaluated on
// the test set with no training, as PyTorch's ImageNet example's --evaluate.
//
// Note [Evaluating without training]
// The weights are those a run with the same options would train from
// (weightsToEvaluate), so the Slurm template, which passes --resume, and a
// fine-tuning job's --init-from both evaluate what they would continue.
// Rank 0 reads them, as --init-from does (a checkpoint's weights
// without its optimizer state: an evaluation must not depend on the
// --optimizer or the batch of the run that wrote it), and the start-up
// parameter broadcast gives them to every rank. Each rank then evaluates its
// own share of the test set (trainer::evaluationShard: every sample once,
// whatever the world size) and one all-reduce sums the loss and the hits,
// which is what the run printed at the end of the epoch it wrote the weights
// in (trainer::evaluate, the Trainer's own evaluation). Nothing else of a
// training run is built: no training set is read, no optimizer, Reducer or
// Trainer made, and the memory check counts the weights and an evaluation
// batch alone (for the default MLP at np=2, 0.66x the wall time and 0.62x
// the peak memory of an evaluation that built them: benchmarks/RESULTS.md,
// "What --evaluate costs"). Nothing is written to --checkpoint-dir, which may be read-only or in
// use by a run still training (its checkpoints are renamed into place whole,
// so the newest one is always complete); --save-model writes the weights
// evaluated, which turns a checkpoint into a model file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "launcher/options.h"
#include "trainer/model_origin.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

// Rank 0: the file --evaluate reads, the weights a run with the same options
// would train from: the one --resume names; with --resume alone the newest
// complete checkpoint in --checkpoint-dir, or while there is none
// --init-from's (Note [Resuming or starting from --init-from] in
// launcher/resume.h); else --init-from's. Throws DataError when there is
// none or --resume names a directory.
std::string weightsToEvaluate(const Options& o);

struct EvaluationReport {
  // The global step of the weights: a checkpoint's, or the one a model file
  // records.
  std::optional<std::size_t> weightsStep() const;

  std::string file;                           // the weights evaluated
  std::optional<std::size_t> checkpointStep;  // when the file was a checkpoint
  // A model file's record of its weights (Note [Where a model file's weights
  // came from] in trainer/model_origin.h).
  std::optional<trainer::ModelOrigin> origin;
  std::string testSet;  // "fashion-mnist/test"
  trainer::EvalResult result;
  int ranks = 1;
  double seconds = 0.0;  // the evaluation's wall time
};

// "evaluated ckpt/step_00000469.safetensors (the weights of step 469):
// test_loss 0.4002  test_acc 85.38%  (fashion-mnist/test: 10000 samples over
// 2 ranks, 0.25 s)"
std::string evaluationText(const EvaluationReport& report);

// Its --metrics line, one JSON object (no newline): "evaluated" (the file),
// "checkpoint_step" (null for a model file), "weights_step" (the step of a
// checkpoint's weights or the one a model file records; null when not
// known), "test_loss", "test_accuracy",
// "test_samples", "ranks", "wall_time_s".
std::string evaluationMetrics(const EvaluationReport& report);

}  // namespace ddp::launcher
