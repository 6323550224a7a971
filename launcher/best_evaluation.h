// The run's best evaluation so far: what --save-best keeps and --early-stop
// watches.
//
// Note [Keeping the best weights]
// The last weights of a run are not always its best: a high learning rate,
// overfitting or a late divergence leaves the lowest test loss some
// evaluations back, and --keep-checkpoints may delete the checkpoint that
// held those weights. So with --save-best FILE, after every evaluation of the
// run (each epoch's end, --eval-every) whose test loss is lower than every
// earlier one, rank 0 replaces FILE with the weights just evaluated, as
// Hugging Face's load_best_model_at_end and Lightning's ModelCheckpoint
// (monitor="val_loss") keep theirs. The loss decides because every
// evaluation computes it (Hugging Face's default metric too); a tie keeps the
// earlier weights and a NaN is never the best. Every rank holds the same
// result of the same evaluation, so all decide alike, and the write sits in
// comm::agree(), where a failed write stops every rank cleanly.
//
// --early-stop N ends the run after N evaluations in a row that did not
// lower the loss (Lightning's and Keras's patience, Hugging Face's
// early_stopping_patience), as --max-steps ends it: a checkpoint there,
// --save-model, exit code 0.
//
// A checkpoint records the best loss, its step and the evaluations since
// (TrainPosition::bestTestLoss, bestStep, evaluationsSinceBest), so a resumed
// run replaces FILE only with better weights than the run it resumes had
// found, and counts on towards --early-stop; a run that had stopped early
// resumes to nothing (unless --early-stop grew). A checkpoint without them
// (older, or written with neither option) starts afresh.
#pragma once

#include <cstddef>
#include <string>

#include "trainer/checkpoint.h"

namespace ddp::launcher {

class BestEvaluation {
 public:
  // `resumedFrom`: the checkpoint's position on resume (its record, if it
  // has one), or a fresh run's default position.
  explicit BestEvaluation(const trainer::TrainPosition& resumedFrom);

  // Takes the test loss of the evaluation after global step `step`; true
  // when it is the lowest so far (it then becomes the best).
  bool observe(double testLoss, std::size_t step);
  // Evaluations since the best one (all of them before there is one).
  std::size_t sinceBest() const { return sinceBest_; }
  // Writes the record into a checkpoint's position.
  void markIn(trainer::TrainPosition& position) const;

  // "saved the best weights so far (test_loss 0.4321 after step 500) to FILE
  // (--save-best)"
  std::string savedText(const std::string& path) const;
  // Why --early-stop `patience` ended the run.
  std::string earlyStopText(std::size_t patience) const;

 private:
  double bestLoss_ = 0.0;
  std::size_t bestStep_ = 0;  // 0: no best yet
  std::size_t sinceBest_ = 0;
};

}  // namespace ddp::launcher
