// The run's best evaluation so far: what --save-best keeps and --early-stop
// watches.
//
// Note [Keeping the best weights]
// The last weights of a run are not always its best: a high learning rate,
// overfitting or a late divergence leaves the lowest test loss some
// evaluations back, and --keep-checkpoints may delete the checkpoint that
// held those weights. So with --save-best FILE, after every evaluation of the
// run (each epoch's end, --eval-every) that is better than every earlier
// one, rank 0 replaces FILE with the weights just evaluated, as Hugging
// Face's load_best_model_at_end and Lightning's ModelCheckpoint keep theirs.
// --best-metric says what "better" means: a lower test loss (the default, as
// Hugging Face's, and computed by every evaluation) or a higher test
// accuracy (Lightning's monitor="val_acc", mode="max"; Hugging Face's
// metric_for_best_model="accuracy"). A tie keeps the earlier weights (an
// accuracy, a count of hits, ties often) and a NaN is never the best. Every
// rank holds the same result of the same evaluation, so all decide alike,
// and the write sits in comm::agree(), where a failed write stops every rank
// cleanly. FILE records the evaluation that chose it (Note [Where a model
// file's weights came from] in trainer/model_origin.h).
//
// --early-stop N ends the run after N evaluations in a row that were not
// better (Lightning's and Keras's patience, Hugging Face's
// early_stopping_patience), as --max-steps ends it: a checkpoint there,
// --save-model, exit code 0.
//
// Note [How much better counts for --early-stop]
// A test loss that creeps down by a thousandth an evaluation is a new best
// every time, so --early-stop alone never ends a run that has stopped
// learning anything that matters. --early-stop-min-delta D counts only an
// evaluation that beats a reference by more than D (lower than it minus D
// for the loss, higher than it plus D for the accuracy), and makes that
// evaluation the new reference; the others count towards the patience.
// This is Lightning's and Keras's min_delta: the reference moves only by
// such a step, so a slow descent that adds up to more than D within the
// patience still counts (Hugging Face's early_stopping_threshold compares
// with the best instead, which every small gain moves, and so stops such a
// run). --save-best is not affected: any strict improvement is written, as
// Lightning's ModelCheckpoint ignores its EarlyStopping's min_delta. With
// D = 0 the reference is the best. A checkpoint records the reference (a
// resumed run with another D goes on from it); one written before it was
// recorded stands the best in for it.
//
// A checkpoint records the best evaluation, its step, the metric that judged
// it and the evaluations since (TrainPosition::best), so a resumed run
// replaces FILE only with better weights than the run it resumes had found,
// and counts on towards --early-stop; a run that had stopped early resumes
// to nothing (unless --early-stop grew). A checkpoint without a record
// (older, or written with neither option) starts afresh, and so does one
// whose record another metric judged: a loss and an accuracy do not compare,
// and the user who changed --best-metric asked for the new one.
//
// Note [A resumed run's best file]
// A resumed run compares against the best its checkpoint records, so it
// writes FILE again only at a better evaluation. If FILE is gone by then
// (written to a node-local disk and the job requeued on another node, moved
// away) or holds other weights, the best weights would be lost without a
// word. So at start-up rank 0 reads FILE's record (Note [Where a model
// file's weights came from]): holding the recorded best step, FILE is left
// alone. Otherwise, when the resumed checkpoint's directory still holds the
// checkpoint of that step (the best fell at an epoch's end or at a
// --checkpoint-every step, and --keep-checkpoints kept it), that checkpoint
// holds exactly the weights that were evaluated (the evaluation and the
// checkpoint both follow the same step), and FILE is written again from it.
// Failing that, a warning says FILE is written only at a better evaluation.
// Reading FILE checks its checksums: one read of a model file at start-up.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "trainer/checkpoint.h"
#include "trainer/evaluation.h"
#include "trainer/model_origin.h"

namespace ddp::launcher {

class BestEvaluation {
 public:
  // `metric`: --best-metric; `minDelta`: --early-stop-min-delta (>= 0).
  // `resumed`: the record of the checkpoint the run resumes from, or a
  // fresh run's empty one; a record that another metric judged is set aside
  // (resumeNotice()).
  BestEvaluation(trainer::BestMetric metric, double minDelta, const trainer::BestRecord& resumed);

  // Takes the result of the evaluation after global step `step`; true when
  // it is better than every earlier one (it then becomes the best).
  bool observe(const trainer::EvalResult& result, std::size_t step);
  const trainer::BestRecord& record() const { return record_; }
  // Evaluations since the last one that counted for --early-stop (Note [How
  // much better counts for --early-stop]): with no minimum delta, since the
  // best one; all of them before there is one.
  std::size_t sinceImproved() const { return record_.evaluationsSince; }
  // Writes the record into a checkpoint's position.
  void markIn(trainer::TrainPosition& position) const { position.best = record_; }
  // What --save-best's file records of the best evaluation (Note [Where a
  // model file's weights came from]).
  trainer::ModelOrigin origin() const;

  // Why a resumed checkpoint's record was set aside; nullopt when it was not.
  std::optional<std::string> resumeNotice() const { return resumeNotice_; }
  // "test_loss 0.4321 after step 500"
  std::string bestText() const;
  // "saved the best weights so far (test_loss 0.4321 after step 500) to FILE
  // (--save-best)"
  std::string savedText(const std::string& path) const;
  // Why --early-stop `patience` ended the run.
  std::string earlyStopText(std::size_t patience) const;

 private:
  double value(const trainer::EvalResult& result) const;
  double bestValue() const;
  // Whether `v` beats `than` by more than `margin` in the metric's direction.
  bool beats(double v, double than, double margin) const;

  double minDelta_;
  trainer::BestRecord record_;
  std::optional<std::string> resumeNotice_;
};

// What restoreBestFile did or could not do, for the log.
struct BestFileNotice {
  bool warning = false;
  std::string text;
};

// Rank 0, on resume with --save-best `path` (Note [A resumed run's best
// file]): nullopt when `path` holds the best weights `best` records (or
// there is no best yet); else writes them to `path` again from the
// checkpoint of their step in `checkpointDir`, the directory of the
// checkpoint resumed, or says why it could not. `model` gives the
// parameters' names and shapes. Throws DataError when that checkpoint is
// damaged or the write fails.
std::optional<BestFileNotice> restoreBestFile(const std::string& path, const BestEvaluation& best,
                                              const std::string& checkpointDir,
                                              trainer::Sequential& model);

}  // namespace ddp::launcher
