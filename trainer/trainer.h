// Trainer: the data-parallel training loop of one rank.
//
// One step (see docs/architecture.md):
//   sampler shard -> batch -> forward -> loss -> backward, during which each
//   gradient bucket's all-reduce starts as soon as its last gradient is
//   written (comm::Reducer) -> wait for all buckets -> SGD step.
// At start the parameters are broadcast from rank 0, so every replica starts
// identical; since every rank then applies the same averaged gradients, they
// stay identical. Evaluation shards the test set without padding and sums over
// ranks, so each test sample counts exactly once.
//
// The Trainer reports through a TrainObserver; presentation (progress lines,
// metrics files) belongs to the launcher.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/bucket_tuner.h"
#include "comm/communicator.h"
#include "comm/reducer.h"
#include "runtime/trace.h"
#include "trainer/batch_loader.h"
#include "trainer/checkpoint.h"
#include "trainer/cross_entropy.h"
#include "trainer/dataset.h"
#include "trainer/distributed_sampler.h"
#include "trainer/evaluation.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/sequential.h"

namespace ddp::trainer {

struct TrainOptions {
  std::size_t epochs = 1;
  std::size_t maxSteps = 0;    // 0: no limit; otherwise stop after this many steps in all
  std::size_t batchSize = 64;  // per rank and micro-batch
  std::size_t gradAccum = 1;   // micro-batches per step; only the last one communicates
  std::size_t firstBucketBytes = std::size_t{1} << 20;
  std::size_t bucketCapBytes = std::size_t{25} << 20;  // 0: one bucket per parameter
  // --bucket-cap-mb auto: the first steps try BucketCapTuner's default caps
  // and keep the fastest (Note [Automatic bucket cap]); bucketCapBytes is
  // then unused. onBucketCapChosen is told the choice, each candidate's
  // median step time (seconds; each step as slow as its slowest rank) and the
  // steps tuning took.
  bool autoBucketCap = false;
  std::function<void(std::size_t cap, const std::vector<std::size_t>& candidates,
                     const std::vector<double>& medians, std::size_t steps)>
      onBucketCapChosen;
  comm::GradCompression compression = comm::GradCompression::kNone;
  std::size_t evalBatchSize = kEvalBatchSize;
  // Also evaluate after every evalEvery-th step of the run (global steps, so
  // a resumed run evaluates where the uninterrupted one did), unless the
  // epoch ends at that step and evaluates anyway; TrainObserver::
  // onStepEvaluation is told. 0: at epoch ends only.
  std::size_t evalEvery = 0;
  // Evaluate on the test set's first this many samples (0: all of them).
  std::size_t evalSamples = 0;
  LrSchedule lrSchedule = LrSchedule::kConstant;  // from the optimizer's initial lr
  std::size_t warmupSteps = 0;                    // a linear ramp first (trainer/lr_schedule.h)
  double minLr = 0.0;                             // where cosine and linear end
  // The steps (warm-up included) over which cosine and linear fall to minLr;
  // 0: the run's planned steps.
  std::size_t lrDecaySteps = 0;
  SamplerOptions sampler;
  // GPU: the host reads the loss (and the step timings) every this many
  // steps and at the end of each epoch; reading waits for the device, so a
  // step never does. CPU steps always report their own loss.
  std::size_t lossReadEvery = 50;
  // After every this many global steps, the ranks average their losses
  // over the steps since the previous such step (one all-reduce of one
  // number; on the GPU the loss is read there) into StepReport::windowLoss:
  // --metrics-every's training curve, the same at any world size for one
  // global batch. 0: never.
  std::size_t lossWindow = 0;
  // GPU: host threads that gather each batch before it is copied to the device.
  unsigned hostThreads = 1;
  // Called on every rank with the position after every checkpointEvery-th
  // step (0: never mid-epoch), at the end of each epoch (the position is
  // then the start of the next) and where maxSteps stops the run. Null: no
  // checkpoints. It must be collective-safe: every rank calls it at the same
  // point.
  std::function<void(const TrainPosition&)> onCheckpoint;
  // Called on every rank right after each evaluation of the run (each
  // epoch's end, each evalEvery one), before the observer sees it, with its
  // result and the global step it followed: --save-best and --early-stop
  // judge it (launcher/best_evaluation.h). Every rank must return the same
  // verdict. The reports carry `best` for --metrics; `stop` ends the run
  // there as maxSteps would: the partial epoch's report (EpochReport::
  // stoppedEarly) takes this evaluation, then the checkpoint. Null:
  // evaluations are not judged.
  std::function<EvaluationVerdict(const EvalResult&, std::size_t globalStep)> judgeEvaluation;
  // Called on every rank after each evaluation of the run, after the
  // observer's report of it and before any checkpoint there, with its result,
  // the global step it followed and judgeEvaluation's verdict (none judged:
  // the default one): --save-best's write. Every rank calls it at the same
  // point, so it may hold collectives; its time counts as the evaluation's
  // for timeUp's reserve.
  std::function<void(const EvalResult&, std::size_t globalStep, const EvaluationVerdict&)>
      onEvaluated;
  std::size_t checkpointEvery = 0;
  // A graceful stop: at each stop check the ranks agree (one small
  // all-reduce) whether any rank's stopRequested() returned a signal; if so,
  // run() writes a checkpoint (onCheckpoint) and returns early, with
  // stoppedBy() set. Null: never stops early. The checks come every
  // stopCheckEvery steps, or every stopCheckSeconds of rank 0's steps when
  // that is fewer steps (Note [How often the ranks check for a stop]).
  std::function<int()> stopRequested;
  std::size_t stopCheckEvery = 10;
  double stopCheckSeconds = 1.0;
  // A time limit (ddp_train --time-limit; Note [Stopping before a time
  // limit]): asked on rank 0 at every stop check with the seconds the
  // trainer expects to pass before the next one (with a checkpoint to
  // write, its replica check included); true stops run() there as
  // a signal does (a checkpoint, then it returns), with stoppedByTimeLimit()
  // set. Every rank must set it or none. Null: no time limit.
  std::function<bool(double secondsToNextCheck)> timeUp;
  // Gradients holding a NaN or infinity after the all-reduce (the same on
  // every rank): false stops run() with NonFiniteError naming the step and
  // the first such parameter, before the update; true skips that step's
  // update on every rank and counts it (EpochReport::skippedSteps). CPU:
  // checked every step. GPU: without skipping, the loss is checked when it
  // is read (lossReadEvery); with it, every step's gradients are checked on
  // the device and the update is cancelled there (Note [Skipping a step on
  // the device] in trainer/optimizer.h), and the skips are reported when the loss
  // is read.
  bool skipNonFinite = false;
  // > 0: every step measures the L2 norm of the averaged gradient
  // (StepReport::gradNorm) and scales the gradient down to this norm when it
  // is larger, before the update (Note [Clipping the averaged gradient] in
  // trainer/clip.h); infinity measures without clipping. 0: neither.
  float clipGradNorm = 0.0f;
  // The fraction of a CPU this rank's training thread can expect from its own
  // job's threads (runtime/cpu_share.h, expectedCpuShare), reported with
  // each epoch and pace window beside what it got (PaceReport::rankCpu).
  double expectedCpuShare = 1.0;
  // The cgroup whose CPU quota binds this rank (runtime/cpu_quota.h;
  // CpuShare::quotaCgroup), "" for none: each pace report says in what
  // fraction of the quota's periods it stopped the rank's threads.
  std::string quotaCgroup;
  // Within an epoch, every this many seconds of training (rank 0's clock,
  // agreed at the stop check every stopCheckEvery steps), the ranks also
  // exchange their pace (TrainObserver::onPace), so that a straggler or a
  // contended CPU is named in a long epoch too. 0: at epoch ends only.
  double paceWindowSeconds = 0.0;
  // rankHosts[r]: rank r's host, for naming a rank whose replica diverged
  // (Note [Checking that the replicas agree]); may be empty.
  std::vector<std::string> rankHosts;
  // Test-only fault injection (ddp_train --inject-fault), on one rank: called
  // before each step with its 1-based global step (may sleep or issue an extra
  // collective); and, when it returns true, that step's gradients on this rank
  // are NaN.
  std::function<void(std::size_t step)> beforeStep;
  std::function<bool(std::size_t step)> poisonGradients;
};

// Where a step's time goes, in seconds (this rank).
struct PhaseTimes {
  double data = 0.0;     // gathering the batch
  double forward = 0.0;  // forward and loss
  double backward = 0.0;
  double comm = 0.0;  // waiting for the gradient all-reduce
  double optimizer = 0.0;
  double total() const { return data + forward + backward + comm + optimizer; }
  PhaseTimes& operator+=(const PhaseTimes& other);
};

// On the GPU, reports are delivered in groups when the loss is read
// (TrainOptions::lossReadEvery): each report of a group carries the group's
// mean loss, its own device-measured phase times, and the throughput at the
// time of reading.
struct StepReport {
  std::size_t epoch = 0;        // 1-based
  std::size_t stepInEpoch = 0;  // 1-based
  std::size_t stepsInEpoch = 0;
  std::size_t globalStep = 0;  // 1-based, over the whole run
  double loss = 0.0;           // this rank's batch loss
  // At every TrainOptions::lossWindow-th global step: the mean loss over all
  // ranks and the steps since the previous one (or since this run began).
  std::optional<double> windowLoss;
  double learningRate = 0.0;      // the rate this step's update used
  double samplesPerSecond = 0.0;  // global, since the epoch started
  // Steps this run still takes in the epoch (maxSteps may end it before the
  // epoch does), and the time they should take at this process's pace so far.
  std::size_t stepsLeft = 0;
  double secondsLeft = 0.0;
  PhaseTimes times;  // this step's phases
  // Set when the step's gradients were not finite and its update was skipped
  // (TrainOptions::skipNonFinite): the first parameter holding one (on GPUs,
  // which check all gradients at once: "at least one parameter").
  std::string skippedFor;
  // TrainOptions::clipGradNorm set and the update not skipped: the norm of
  // the averaged gradient before clipping, and whether it was clipped.
  std::optional<float> gradNorm;
  bool clipped = false;
};

// The gradient norms of the steps of an epoch that measured one
// (StepReport::gradNorm).
struct GradNormSummary {
  bool clipping = false;  // to a finite norm (not only measuring)
  std::size_t steps = 0;
  double sum = 0.0;
  double max = 0.0;
  std::size_t clipped = 0;
  void add(double norm, bool wasClipped);
  double mean() const { return steps > 0 ? sum / static_cast<double>(steps) : 0.0; }
};

// Each rank's pace over a stretch of steps (an epoch, or a window of one),
// gathered from every rank: its mean compute per step, in ms (every phase but
// the wait for the all-reduce, which is where the others wait for the
// slowest: Note [Finding a straggler] in launcher/progress.h), and its
// training thread's seconds on a CPU and waiting for one, with the share its
// own job leaves it (Note [Finding a contended CPU]; zeros where the kernel
// keeps no run-queue figures).
struct PaceReport {
  std::size_t epoch = 0;
  std::size_t firstStep = 0;   // global, 1-based
  std::size_t lastStep = 0;    // inclusive
  std::size_t timedSteps = 0;  // the steps behind rankComputeMs (an epoch's first is not timed)
  struct CpuTime {
    double running = 0.0;
    double waiting = 0.0;
    double expectedShare = 1.0;
    // The fraction of its cgroup's CPU quota periods in which the quota ran
    // out and the kernel stopped its threads; negative without a quota.
    double throttled = -1.0;
  };
  std::vector<double> rankComputeMs;
  std::vector<CpuTime> rankCpu;
};

struct EpochReport {
  std::size_t epoch = 0;
  std::size_t steps = 0;
  std::size_t stepsInEpoch = 0;  // a full epoch's steps: more than `steps` when maxSteps stopped it
  double trainLoss = 0.0;        // mean batch loss over all ranks and steps
  double learningRate = 0.0;     // the rate of the epoch's last step
  EvalResult test;
  std::optional<bool> best;  // TrainOptions::judgeEvaluation's verdict
  // TrainOptions::judgeEvaluation ended the run after `steps` of the epoch,
  // at an evalEvery evaluation (or at the epoch's end).
  bool stoppedEarly = false;
  double samplesPerSecond = 0.0;  // global training throughput
  double trainSeconds = 0.0;      // the training steps only
  double wallSeconds = 0.0;       // including evaluation
  std::size_t skippedSteps = 0;   // updates skipped for non-finite gradients
  PhaseTimes meanStep;            // rank 0's mean step phases over the epoch
  PaceReport pace;                // every rank's, over the epoch
  // TrainOptions::clipGradNorm set: the norms of this run's steps in the epoch.
  std::optional<GradNormSummary> gradNorms;
};

// An evaluation within an epoch (TrainOptions::evalEvery), after globalStep.
struct StepEvaluation {
  std::size_t epoch = 0;
  std::size_t stepInEpoch = 0;
  std::size_t stepsInEpoch = 0;
  std::size_t globalStep = 0;
  EvalResult test;
  double seconds = 0.0;      // the evaluation's wall time on this rank
  std::optional<bool> best;  // TrainOptions::judgeEvaluation's verdict
};

// Note [How often the ranks check for a stop]
// A stop (a signal, --time-limit) takes effect at the next stop check,
// where the ranks agree to stop after the same step, so the checks' spacing
// is how long a signal waits: Slurm's KillWait and a Kubernetes pod's grace
// give 30 s after SIGTERM, mpirun 1 s after Ctrl-C. A check every 10 steps
// costs nothing measurable at millisecond steps (one all-reduce of four
// ints), but at steps of seconds (a large model, gradient accumulation) 10
// steps outlast those graces, and the checkpoint is lost. So at each check
// rank 0 sets how many steps away the next one is, from the pace of its
// steps since the last: as many as fit in stopCheckSeconds, at least 1 and
// at most stopCheckEvery. It travels in the check's own all-reduce, so
// every rank checks after the same step, with no clock of its own.

// Steps to the next stop check at `stepSeconds` a step (Note [How often
// the ranks check for a stop]): those that fit in `seconds`, within [1, most].
std::size_t stepsToNextCheck(double stepSeconds, double seconds, std::size_t most);

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void onStep(const StepReport&) {}
  virtual void onEpoch(const EpochReport&) {}
  // After every TrainOptions::evalEvery-th step within an epoch, on every rank.
  virtual void onStepEvaluation(const StepEvaluation&) {}
  // Within a long epoch (TrainOptions::paceWindowSeconds), on every rank.
  virtual void onPace(const PaceReport&) {}
};

// Why Trainer::run() returned.
enum class RunEnd {
  kEpochs,     // every epoch was trained (a resumed run: every epoch left)
  kMaxSteps,   // TrainOptions::maxSteps ended the run before the last epoch's end
  kEarlyStop,  // TrainOptions::judgeEvaluation's verdict
  kSignal,     // TrainOptions::stopRequested (Trainer::stoppedBy names the signal)
  kTimeLimit,  // TrainOptions::timeUp
};

class Trainer {
 public:
  // All references must outlive the Trainer. Collective: every rank constructs
  // one with equal options.
  // The model may be on the CPU or on a CUDA device (Sequential::to); data are
  // then copied there batch by batch. `comm` must reduce memory where the
  // model is (MPI: host, NCCL: device).
  Trainer(comm::Communicator& comm, Sequential& model, Optimizer& optimizer, const Dataset& train,
          const Dataset& test, TrainOptions options);
  ~Trainer();

  // Trains for options.epochs (or until maxSteps), evaluating after each epoch.
  void run(TrainObserver& observer);
  // Makes run() continue from `position` (a checkpoint's; parameters and
  // optimizer state are restored by loadCheckpoint). With the world size that
  // wrote it, the rest of the run is exactly the uninterrupted run's; with
  // another, the rest of the epoch is re-sharded
  // (DistributedSampler::remainingIndices).
  void resumeFrom(const TrainPosition& position);
  // Why run() returned; kEpochs before it has.
  RunEnd ended() const { return ended_; }
  // The signal that stopped run() early (TrainOptions::stopRequested), or 0.
  int stoppedBy() const { return stoppedBy_; }
  // Whether TrainOptions::timeUp stopped run() early.
  bool stoppedByTimeLimit() const { return ended_ == RunEnd::kTimeLimit; }
  // Loss and accuracy on the test set, over every rank (trainer::evaluate).
  // Collective.
  EvalResult evaluate();
  // The Reducer that owns the gradients (its buckets, its last launches).
  const comm::Reducer& reducer() const { return *reducer_; }
  // One step on the given samples (gradAccum micro-batches of batchSize);
  // returns this rank's loss (on the GPU this waits for the step). For tests.
  double step(std::span<const std::size_t> batchIndices);

  std::size_t globalStep() const { return globalStep_; }
  // Records steps [first, first + steps) (0-based global steps) into `trace`:
  // forward, each layer's backward, each bucket's all-reduce, the wait after
  // backward and the optimizer. `trace` must outlive the Trainer.
  void setTrace(Trace* trace, std::size_t first, std::size_t steps) {
    trace_ = trace;
    traceFirst_ = first;
    traceSteps_ = steps;
  }
  // Steps run() will take in all (epochs x steps per epoch, capped by maxSteps).
  std::size_t plannedSteps() const;
  // Steps in a whole epoch on this world.
  std::size_t stepsPerEpoch() const;

 private:
  std::size_t samplesPerStep() const { return options_.batchSize * options_.gradAccum; }
  // TrainOptions::judgeEvaluation's verdict on the evaluation after this
  // step; nothing to do without one.
  EvaluationVerdict judge(const EvalResult& test) const;
  // Issues one step; its loss goes into trainTotals_, its times into
  // lastTimes_ (CPU) or the GPU's step timer.
  void runStep(std::span<const std::size_t> batchIndices);
  // Forward and loss of one micro-batch of the training set, into
  // trainTotals_ with `weight` x its mean loss; the load is timed as the
  // step's data phase.
  void forwardMicroBatch(std::span<const std::size_t> indices, double weight);
  // (Re)builds the Reducer with buckets of at most `capBytes` and points
  // every trainable parameter's gradient into its storage. Collective.
  void buildReducer(std::size_t capBytes);
  void tuneBucketCap(std::chrono::steady_clock::time_point stepStart);
  struct Gpu;  // the GPU path's state (trainer_gpu.h); null on the CPU

  comm::Communicator& comm_;
  Sequential& model_;
  Optimizer& optimizer_;
  const Dataset& train_;
  const Dataset& test_;
  TrainOptions options_;
  DistributedSampler sampler_;
  SoftmaxCrossEntropy loss_;
  Device device_;
  LossTotals trainTotals_;
  std::unique_ptr<Gpu> gpu_;
  std::unique_ptr<comm::Reducer> reducer_;
  std::unique_ptr<comm::BucketCapTuner> tuner_;           // --bucket-cap-mb auto, while it decides
  std::vector<std::vector<std::size_t>> layerGradients_;  // per layer: its trainable gradients
  BatchLoader batches_;                                   // training and evaluation batches
  std::size_t globalStep_ = 0;
  PhaseTimes lastTimes_;
  std::chrono::steady_clock::time_point phaseMark_;  // end of the last timed phase (CPU)
  Trace* trace_ = nullptr;
  std::size_t traceFirst_ = 0;
  std::size_t traceSteps_ = 0;
  double baseLr_;
  TrainPosition resume_;  // where run() starts
  RunEnd ended_ = RunEnd::kEpochs;
  int stoppedBy_ = 0;
  std::string skippedFor_;         // the last step's, when its update was skipped
  std::optional<float> gradNorm_;  // the last step's (CPU; GPUs: read with the loss)
};

}  // namespace ddp::trainer
