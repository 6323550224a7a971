// --save-best: the weights of the run's best evaluation so far, on disk.
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
// evaluation computes it (Hugging Face's default metric too); a NaN is never
// the best. Every rank holds the same result of the same evaluation, so all
// decide alike, and the write sits in comm::agree(), where a failed write
// stops every rank cleanly. A checkpoint records the best loss and its step
// (TrainPosition::bestTestLoss, bestStep), so a resumed run replaces FILE
// only with better weights than the run it resumes had found; a checkpoint
// without them (older, or written without --save-best) starts afresh.
#pragma once

#include <cstddef>
#include <string>

#include "trainer/checkpoint.h"

namespace ddp::launcher {

class BestWeights {
 public:
  // `resumedFrom`: the checkpoint's position on resume (its best, if it
  // records one), or a fresh run's default position.
  BestWeights(std::string path, const trainer::TrainPosition& resumedFrom);

  // Whether an evaluation's test loss beats every earlier one's.
  bool isBest(double testLoss) const;
  // The evaluation after global step `step` was the best so far.
  void record(double testLoss, std::size_t step);
  // Writes the best so far into a checkpoint's position.
  void markIn(trainer::TrainPosition& position) const;

  const std::string& path() const { return path_; }
  // "saved the best weights so far (test_loss 0.4321 after step 500) to FILE"
  std::string savedText() const;

 private:
  std::string path_;
  double bestLoss_ = 0.0;
  std::size_t bestStep_ = 0;  // 0: no evaluation yet
};

}  // namespace ddp::launcher
