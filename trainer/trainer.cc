#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "ddp_config.h"
#include "runtime/cpu_quota.h"
#include "runtime/cpu_share.h"
#include "runtime/error.h"
#include "runtime/process_stops.h"
#include "trainer/clip.h"
#include "trainer/replica_check.h"
#include "trainer/trainer_gpu.h"
#if DDP_WITH_CUDA
#include "runtime/cuda/context.h"
#endif

namespace ddp::trainer {

namespace {

using Clock = std::chrono::steady_clock;

#if DDP_WITH_CUDA
// StepReport::skippedFor on GPUs, where the check is one flag per step.
constexpr const char* kSomeParameter = "at least one parameter";
#endif

// Less the time the process was stopped (Note [Time the process was
// stopped] in runtime/process_stops.h), once a thread has looked: a
// suspended job's epoch time, throughput, step rate and phase times are
// those of its training.
double secondsSince(Clock::time_point start) {
  return stops::runningSecondsSince(start);
}

// A stretch of steps (an epoch, or a pace window within one): its steps'
// phase times, and the training thread's run-queue times and its CPU
// quota's throttling counts (`quotaCgroup`, "" for none) at its start.
struct Stretch {
  Stretch(std::size_t first, const std::string& quotaCgroup)  // starting now
      : firstStep(first),
        throttle(quotaCgroup.empty() ? std::nullopt : throttleCounts(quotaCgroup)) {}
  Clock::time_point start = Clock::now();
  std::size_t firstStep;  // global, 1-based
  PhaseTimes sum;
  std::size_t steps = 0;  // timed steps in `sum`
  RunQueueTimes cpu = threadRunQueueTimes().value_or(RunQueueTimes{});
  std::optional<ThrottleCounts> throttle;
  void add(const PhaseTimes& times) {
    sum += times;
    ++steps;
  }
};

// Every rank's pace over `stretch`, which ends at `lastStep` of `epoch`: one
// allgather for rank 0's straggler and contention checks (Notes [Finding a
// straggler], [Finding a contended CPU] in launcher/progress.h). Collective.
PaceReport gatherPace(comm::Communicator& comm, const TrainOptions& options, std::size_t epoch,
                      std::size_t lastStep, const Stretch& stretch) {
  const RunQueueTimes cpuNow = threadRunQueueTimes().value_or(stretch.cpu);
  const PhaseTimes& sum = stretch.sum;
  // A stretch this process was stopped in (Note [Time the process was
  // stopped] in runtime/process_stops.h) says nothing of its pace: the stop
  // sits in whichever phase it came in. NaN: not compared.
  const bool stopped = stops::stoppedBetween(stretch.start, Clock::now()) > Clock::duration::zero();
  const double computeMs = stopped ? std::numeric_limits<double>::quiet_NaN()
                           : stretch.steps > 0
                               ? (sum.total() - sum.comm) / static_cast<double>(stretch.steps) * 1e3
                               : 0.0;
  std::optional<double> throttled;
  if (stretch.throttle) {
    if (const auto now = throttleCounts(options.quotaCgroup))
      throttled = throttledFraction(*stretch.throttle, *now);
  }
  constexpr std::size_t kFields = 5;
  const double mine[kFields] = {computeMs, cpuNow.running - stretch.cpu.running,
                                cpuNow.waiting - stretch.cpu.waiting, options.expectedCpuShare,
                                throttled.value_or(-1.0)};
  std::vector<double> all(kFields * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const double>(mine), std::span<double>(all))
      ->wait(comm.options().timeout);
  PaceReport pace;
  pace.epoch = epoch;
  pace.firstStep = stretch.firstStep;
  pace.lastStep = lastStep;
  pace.timedSteps = stretch.steps;
  for (std::size_t r = 0; r < all.size() / kFields; ++r) {
    const double* theirs = all.data() + kFields * r;
    pace.rankComputeMs.push_back(theirs[0]);
    pace.rankCpu.push_back({theirs[1], theirs[2], theirs[3], theirs[4]});
  }
  return pace;
}

}  // namespace

std::size_t stepsToNextCheck(double stepSeconds, double seconds, std::size_t most) {
  if (!(stepSeconds > 0)) return most;
  const double fit = std::floor(seconds / stepSeconds);
  return fit >= static_cast<double>(most) ? most
                                          : std::max<std::size_t>(1, static_cast<std::size_t>(fit));
}

void GradNormSummary::add(double norm, bool wasClipped) {
  ++steps;
  sum += norm;
  max = std::max(max, norm);
  clipped += wasClipped ? 1 : 0;
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  data += other.data;
  forward += other.forward;
  backward += other.backward;
  comm += other.comm;
  optimizer += other.optimizer;
  return *this;
}

Trainer::Trainer(comm::Communicator& comm, Sequential& model, Optimizer& optimizer,
                 const Dataset& train, const Dataset& test, TrainOptions options)
    : comm_(comm),
      model_(model),
      optimizer_(optimizer),
      train_(train),
      test_(test),
      options_(options),
      sampler_(train.size(), comm.size(), comm.rank(), options.sampler),
      device_(model.device()),
      trainTotals_(device_),
      batches_(device_, options.hostThreads),
      baseLr_(optimizer.learningRate()) {
  DDP_CHECK(options_.batchSize > 0 && options_.evalBatchSize > 0, "batch sizes must be positive");
  DDP_CHECK(options_.lossReadEvery > 0, "lossReadEvery must be positive");
  if (device_ == Device::kCuda) {
    gpu_ = std::make_unique<Gpu>(options_.skipNonFinite ? options_.lossReadEvery : 0,
                                 options_.clipGradNorm > 0 ? options_.lossReadEvery : 0,
                                 static_cast<std::size_t>(comm.size()));
  }
  DDP_CHECK(options_.gradAccum > 0, "gradient accumulation needs at least one micro-batch");
  if (options_.autoBucketCap) {
    tuner_ = std::make_unique<comm::BucketCapTuner>(comm::BucketCapTuner::defaultCandidates());
  }
  buildReducer(tuner_ ? tuner_->currentCap() : options_.bucketCapBytes);
  // Which gradients each layer finishes, for Reducer::markReady.
  std::size_t next = 0;
  layerGradients_.resize(model_.size());
  for (std::size_t l = 0; l < model_.size(); ++l) {
    for (Parameter* p : model_.layer(l).parameters()) {
      if (p->trainable) layerGradients_[l].push_back(next);
      ++next;
    }
  }
}

Trainer::~Trainer() = default;

void Trainer::buildReducer(std::size_t capBytes) {
  // Every trainable gradient becomes a view into its Reducer bucket: backward
  // writes it in place, and nothing is copied into or out of a fusion buffer.
  std::vector<comm::GradientSpec> specs;
  const std::vector<Parameter*> parameters = model_.parameters();
  for (Parameter* p : parameters)
    specs.push_back({p->name, p->value.numel(), p->trainable});
  comm::ReducerOptions reducerOptions;
  reducerOptions.bucketCapBytes = capBytes;
  reducerOptions.firstBucketBytes = std::min(options_.firstBucketBytes, capBytes);
  reducerOptions.gradientsPreScaled = true;
  reducerOptions.compression = options_.compression;  // Note [Averaging by pre-scaling]
  // Note [Reduce-scatter for a sharded optimizer] in comm/reducer.h.
  const std::optional<GradientPartition> partition = optimizer_.gradientPartition();
  if (partition) reducerOptions.scatterBounds = partition->bounds;
  reducer_.reset();  // its storage is released before the next one is allocated
  reducer_ = std::make_unique<comm::Reducer>(comm_, std::move(specs), reducerOptions);
  const float* storage = static_cast<const float*>(reducer_->storage().get());
  std::size_t trainable = 0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i]->trainable) continue;
    parameters[i]->grad = Tensor::view(reducer_->gradient(i).data(), parameters[i]->value.shape(),
                                       reducer_->storage(), device_);
    // The optimizer reads its part where the Reducer reduces it.
    DDP_CHECK(!partition || static_cast<std::size_t>(reducer_->gradient(i).data() - storage) ==
                                partition->offsets.at(trainable),
              str("the sharded optimizer expects the gradient of ", parameters[i]->name,
                  " elsewhere than the Reducer keeps it"));
    ++trainable;
  }
}

// Note [Automatic bucket cap] in comm/bucket_tuner.h: after each of the first
// steps, the step's time goes to the tuner, and the Reducer re-partitions its
// storage for the cap the next step tries (Reducer::setBucketCaps: the
// gradient views stay valid, nothing is allocated).
void Trainer::tuneBucketCap(std::chrono::steady_clock::time_point stepStart) {
  if (!tuner_ || !tuner_->tuning()) return;
#if DDP_WITH_CUDA
  if (gpu_) ddp::cuda::synchronizeCompute();  // the step's kernels are done: its wall time is real
#endif
  const std::size_t before = tuner_->currentCap();
  tuner_->recordStep(secondsSince(stepStart), comm_);
  if (const std::size_t cap = tuner_->currentCap(); cap != before) {
    reducer_->setBucketCaps(std::min(options_.firstBucketBytes, cap), cap);
  }
  if (!tuner_->tuning() && options_.onBucketCapChosen) {
    options_.onBucketCapChosen(tuner_->chosen(), tuner_->candidates(), tuner_->medians(),
                               tuner_->steps());
  }
}

double Trainer::step(std::span<const std::size_t> batchIndices) {
  runStep(batchIndices);
#if DDP_WITH_CUDA
  if (gpu_) {
    gpu_->timer.take();
    gpu_->gradNorms.take();
    const std::vector<std::int32_t> flags = gpu_->skipFlags.take();  // empty without skipping
    if (!flags.empty() && flags.back() != 0) skippedFor_ = kSomeParameter;
  }
#endif
  return trainTotals_.take().first;
}

void Trainer::forwardMicroBatch(std::span<const std::size_t> indices, double weight) {
  const BatchLoader::Batch batch = batches_.load(train_, indices);
  if (gpu_) {
    gpu_->mark(kDataPhase);
  } else {
    lastTimes_.data += secondsSince(phaseMark_);
    phaseMark_ = Clock::now();
  }
  forwardWithLoss(model_, loss_, batch, weight, trainTotals_);
}

// Note [Averaging by pre-scaling]
// DDP needs the mean of the ranks' gradients. Dividing after the sum costs a
// pass over every gradient per step (7 MiB for the default MLP: measured at
// ~0.5 ms of a 9 ms step on these machines). Gradients are linear in the
// loss gradient, so the trainer scales d(loss)/d(logits) by 1/world before
// backward and all-reduces with a plain sum: the result is the mean, at no
// cost. (Horovod calls this a prescale factor.) The reported loss is not
// scaled. For a power-of-two world size the two are bit-identical; otherwise
// they differ by float rounding only.
void Trainer::runStep(std::span<const std::size_t> batchIndices) {
  phaseMark_ = Clock::now();
  const auto stepStart = phaseMark_;
  auto lap = [this] {
    const auto now = Clock::now();
    const double seconds =
        std::chrono::duration<double>(stops::runningBetween(phaseMark_, now)).count();
    phaseMark_ = now;
    return seconds;
  };
  lastTimes_ = PhaseTimes{};
  skippedFor_.clear();
  gradNorm_.reset();
  const std::size_t stepNumber = globalStep_ + 1;
  comm_.setContext(str("step ", stepNumber));
  if (options_.beforeStep) options_.beforeStep(stepNumber);
  const float poison = options_.poisonGradients && options_.poisonGradients(stepNumber)
                           ? std::numeric_limits<float>::quiet_NaN()
                           : 1.0f;
#if DDP_WITH_CUDA
  if (gpu_) gpu_->timer.beginStep();
#endif
  auto gpuMark = [this](Phase phase) {
    if (gpu_) gpu_->mark(phase);
  };
  const bool tracing = !gpu_ && trace_ != nullptr && globalStep_ >= traceFirst_ &&
                       globalStep_ < traceFirst_ + traceSteps_;
  // Micro-batches of batchSize; only the last backward reduces (no_sync for
  // the others). Micro-batch j's loss gradient is scaled by its share of the
  // step's samples and by 1/world, so the reduced gradient is the mean over
  // every sample of the step on every rank (Note [Averaging by pre-scaling]).
  const std::size_t total = batchIndices.size();
  const float world = static_cast<float>(comm_.size());
  for (std::size_t begin = 0; begin < total; begin += options_.batchSize) {
    const std::size_t size = std::min(options_.batchSize, total - begin);
    const bool last = begin + size == total;
    const float share = static_cast<float>(size) / static_cast<float>(total);
    const auto forwardStart = Clock::now();
    forwardMicroBatch(batchIndices.subspan(begin, size), share);
    lastTimes_.forward += lap();
    gpuMark(kForwardPhase);
    if (tracing) trace_->span("forward", "forward", Trace::kCompute, forwardStart, phaseMark_);
    reducer_->prepareForBackward(/*reduce=*/last);
    auto layerStart = phaseMark_;
    model_.backward(loss_.backward(share / world * poison),
                    begin == 0 ? GradMode::kOverwrite : GradMode::kAccumulate,
                    [&](std::size_t layer, Layer&) {
                      for (std::size_t g : layerGradients_[layer])
                        reducer_->markReady(g);
                      if (!tracing) return;
                      const auto now = Clock::now();
                      trace_->span(str("backward layers.", layer), "backward", Trace::kCompute,
                                   layerStart, now);
                      layerStart = now;
                    });
    lastTimes_.backward += lap();
    gpuMark(kBackwardPhase);
  }
  const auto waitStart = phaseMark_;
  reducer_->finalize();
  lastTimes_.comm = lap();
  gpuMark(kCommPhase);
  const auto optimizerStart = phaseMark_;
  if (!gpu_) {
    if (const std::optional<std::size_t> bad = reducer_->firstNonFinite()) {
      const std::string& name = reducer_->gradients()[*bad].name;
      if (!options_.skipNonFinite) {
        throw NonFiniteError(
            str("step ", stepNumber, ": the gradient of ", name,
                " holds a NaN or infinity after the all-reduce (the first parameter that does; a "
                "rank's batch, the learning rate or the weights may be to blame); stopped before "
                "the update (--skip-nonfinite skips such steps instead)"));
      }
      skippedFor_ = name;
    }
  }
  StepInputs update;
#if DDP_WITH_CUDA
  if (gpu_ && options_.skipNonFinite) update.deviceSkip = gpu_->flagNonFinite(*reducer_, comm_);
  if (gpu_ && options_.clipGradNorm > 0)
    update.deviceGradScale = gpu_->clipGradients(*reducer_, comm_, options_.clipGradNorm);
#endif
  // Note [Clipping the averaged gradient] in trainer/clip.h.
  if (!gpu_ && options_.clipGradNorm > 0 && skippedFor_.empty()) {
    gradNorm_ = static_cast<float>(std::sqrt(reducer_->sumOfSquares()));
    update.gradScale = clipScale(*gradNorm_, options_.clipGradNorm);
  }
  if (skippedFor_.empty()) optimizer_.step(update);
  lastTimes_.optimizer = lap();
  gpuMark(kOptimizerPhase);
  if (tracing) {
    trace_->span("wait for all-reduce", "comm", Trace::kCompute, waitStart, optimizerStart);
    trace_->span("optimizer", "optimizer", Trace::kCompute, optimizerStart, phaseMark_);
    for (const comm::Reducer::Launch& launch : reducer_->launches()) {
      const comm::Bucket& bucket = reducer_->buckets()[launch.bucket];
      trace_->span(str(reducer_->scatters() ? "reduce-scatter" : "all-reduce", " bucket ",
                       launch.bucket, " (", fixed(bucket.count * 4.0 / (1 << 20), 2), " MiB)"),
                   "comm", Trace::kComm, launch.work->startedAt(), launch.work->completedAt());
    }
  }
  ++globalStep_;
  tuneBucketCap(stepStart);
}

std::size_t Trainer::stepsPerEpoch() const {
  return (sampler_.samplesPerRank() + samplesPerStep() - 1) / samplesPerStep();
}

std::size_t Trainer::plannedSteps() const {
  const std::size_t all = stepsPerEpoch() * options_.epochs;
  return options_.maxSteps > 0 ? std::min(all, options_.maxSteps) : all;
}

void Trainer::resumeFrom(const TrainPosition& position) {
  resume_ = position;
  globalStep_ = position.globalStep;
}

void Trainer::run(TrainObserver& observer) {
  // Over which steps cosine and linear fall (TrainOptions::lrDecaySteps).
  const std::size_t decaySteps = options_.lrDecaySteps > 0 ? options_.lrDecaySteps : plannedSteps();
  const auto world = static_cast<double>(comm_.size());
  const std::size_t worldSize = static_cast<std::size_t>(comm_.size());
  std::size_t agreedStep = globalStep_;  // equal since broadcastParameters or the resume
  const auto learningRate = [&](std::size_t step) {  // 0-based
    return learningRateAt(options_.lrSchedule, baseLr_, step, decaySteps, options_.warmupSteps,
                          options_.minLr);
  };
  // The last stop check and the next (Note [How often the ranks check for
  // a stop]): a stretch between two may span an epoch's end, its evaluation
  // and checkpoint included.
  Clock::time_point lastCheck = Clock::now();
  std::size_t lastCheckStep = globalStep_;
  std::size_t nextCheckStep = (globalStep_ / options_.stopCheckEvery + 1) * options_.stopCheckEvery;
  // This run's longest mean step between two checks, longest evaluation
  // and longest replica check, in seconds: what TrainOptions::timeUp is
  // told to expect.
  double longestStep = 0.0, longestEvaluation = 0.0, longestReplicaCheck = 0.0;
  // This rank's losses since the last TrainOptions::lossWindow step, which
  // may lie in an earlier epoch.
  double windowLossSum = 0.0;
  std::size_t windowSteps = 0;
  auto endsLossWindow = [&](std::size_t step) {
    return options_.lossWindow > 0 && step % options_.lossWindow == 0;
  };
  // A run resumed past maxSteps ends by it, even with no epoch left either
  // (the resume's warning names maxSteps first too).
  ended_ = options_.maxSteps > 0 && globalStep_ >= options_.maxSteps ? RunEnd::kMaxSteps
                                                                     : RunEnd::kEpochs;
  for (std::size_t epoch = resume_.epoch; epoch <= options_.epochs; ++epoch) {
    if (options_.maxSteps > 0 && globalStep_ >= options_.maxSteps) {
      ended_ = RunEnd::kMaxSteps;
      break;
    }
    Stretch epochSteps(globalStep_ + 1, options_.quotaCgroup);  // this run's part of the epoch
    const auto epochStart = epochSteps.start;
    // --eval-every's evaluations within the epoch, left out of its samples/s.
    double evaluatingSeconds = 0.0;
    sampler_.setEpoch(epoch - 1);
    // A resumed epoch continues after the samples its first part trained on.
    const bool resumed = epoch == resume_.epoch && resume_.consumed > 0;
    const std::vector<std::size_t> shard =
        resumed ? sampler_.remainingIndices(resume_.consumed) : sampler_.indices();
    std::size_t consumed = resumed ? resume_.consumed : 0;
    double lossSum = resumed ? resume_.epochLossSum : 0.0;
    const std::size_t stepsBefore = resumed ? resume_.epochSteps : 0;  // by an earlier run
    std::size_t steps = stepsBefore, samples = 0;
    const std::size_t stepsThisEpoch =
        steps + (shard.size() + samplesPerStep() - 1) / samplesPerStep();
    Stretch window = epochSteps;  // since the last pace report (paceWindowSeconds)
    std::size_t skipped = 0;
    GradNormSummary gradNorms;  // this run's steps of the epoch
    gradNorms.clipping = std::isfinite(options_.clipGradNorm);
    // Steps whose loss has not been read yet (on the CPU, never more than one).
    std::vector<StepReport> unread;
    auto reportUnread = [&] {
      if (unread.empty()) return;
      const double loss = trainTotals_.take().first;  // waits for the device
      if (gpu_) {
        bool anySkipped = false;
#if DDP_WITH_CUDA
        const std::vector<float> norms = gpu_->gradNorms.take();  // empty without clipping
        DDP_CHECK(norms.empty() || norms.size() == unread.size(), "gradient norms out of step");
        for (std::size_t i = 0; i < norms.size(); ++i)
          unread[i].gradNorm = norms[i];
        // Every rank holds the same reduced gradients, so the same flags.
        const std::vector<std::int32_t> flags = gpu_->skipFlags.take();
        DDP_CHECK(flags.empty() || flags.size() == unread.size(), "skip flags out of step");
        for (std::size_t i = 0; i < flags.size(); ++i) {
          if (flags[i] == 0) continue;
          unread[i].skippedFor = kSomeParameter;
          ++skipped;
          anySkipped = true;
        }
#endif
        // Each rank reads its own loss, so the ranks agree before any stops.
        std::int32_t nonFinite = std::isfinite(loss) ? 0 : 1;
        comm_.allreduceSync(std::span<std::int32_t>(&nonFinite, 1), comm::ReduceOp::kMax);
        // A skipped step's loss may be what was not finite: it was dealt with.
        if (nonFinite != 0 && !anySkipped) {
          throw NonFiniteError(str("steps ", unread.front().globalStep, " to ",
                                   unread.back().globalStep, ": the loss of ",
                                   std::isfinite(loss) ? "another rank" : "this rank", " is ",
                                   std::isfinite(loss) ? "not finite" : str(loss),
                                   " (a batch, the learning rate or the weights may be to blame)"));
        }
      }
      lossSum += loss;
      windowLossSum += loss;
      windowSteps += unread.size();
      // A window's last step is read where it is run (below), so it ends a group.
      if (endsLossWindow(unread.back().globalStep)) {
        double sum = windowLossSum;
        comm_.allreduceSync(std::span<double>(&sum, 1), comm::ReduceOp::kSum);
        unread.back().windowLoss = sum / (world * static_cast<double>(windowSteps));
        windowLossSum = 0.0;
        windowSteps = 0;
      }
#if DDP_WITH_CUDA
      if (gpu_) {
        const std::vector<cuda::StepTimer::Durations> times = gpu_->timer.take();
        DDP_CHECK(times.size() == unread.size(), "step timer out of step with the trainer");
        for (std::size_t i = 0; i < unread.size(); ++i) {
          const auto& t = times[i];
          unread[i].times = {t[kDataPhase], t[kForwardPhase], t[kBackwardPhase], t[kCommPhase],
                             t[kOptimizerPhase]};
        }
      }
#endif
      const double elapsed = secondsSince(epochStart);
      for (StepReport& r : unread) {
        if (!r.skippedFor.empty()) r.gradNorm.reset();  // not a norm of any update
        if (r.gradNorm) {
          r.clipped = clipScale(*r.gradNorm, options_.clipGradNorm) < 1.0f;
          gradNorms.add(*r.gradNorm, r.clipped);
        }
        r.loss = loss / static_cast<double>(unread.size());
        r.secondsLeft = elapsed / static_cast<double>(r.stepInEpoch - stepsBefore) *
                        static_cast<double>(r.stepsLeft);
        r.samplesPerSecond = world * static_cast<double>(samples) / (elapsed - evaluatingSeconds);
        epochSteps.add(r.times);
        window.add(r.times);
        observer.onStep(r);
      }
      unread.clear();
    };
    // Note [Checking that the replicas agree]: at each epoch's end and before
    // every checkpoint, once per step.
    auto verifyReplicas = [&] {
      if (agreedStep == globalStep_) return;
      const Clock::time_point start = Clock::now();
      verifyReplicasAgree(comm_, model_, optimizer_, options_.rankHosts,
                          {epoch, globalStep_, agreedStep});
      agreedStep = globalStep_;
      longestReplicaCheck = std::max(longestReplicaCheck, secondsSince(start));
    };
    auto checkpoint = [&](std::size_t atEpoch, std::size_t atConsumed) {
      if (!options_.onCheckpoint) return;
      verifyReplicas();
      reportUnread();  // the loss so far is part of the position
      const bool next = atEpoch != epoch;
      options_.onCheckpoint(TrainPosition{atEpoch, atConsumed, globalStep_, comm_.size(),
                                          next ? 0.0 : lossSum, next ? 0 : steps,
                                          samplesPerStep() * worldSize, BestRecord{}});
    };
    bool checkpointed = false;
    // An evalEvery evaluation that ended the run: the partial epoch's report
    // takes it, as the evaluation --max-steps makes at its end.
    std::optional<std::pair<EvalResult, EvaluationVerdict>> stoppingEvaluation;
    for (std::size_t begin = 0; begin < shard.size(); begin += samplesPerStep()) {
      if (options_.maxSteps > 0 && globalStep_ >= options_.maxSteps) break;
      const std::size_t end = std::min(shard.size(), begin + samplesPerStep());
      const double lr = learningRate(globalStep_);
      optimizer_.setLearningRate(static_cast<float>(lr));
      runStep(std::span(shard).subspan(begin, end - begin));
      ++steps;
      samples += end - begin;
      consumed += (end - begin) * worldSize;
      StepReport step;
      step.epoch = epoch;
      step.stepInEpoch = steps;
      step.stepsInEpoch = stepsThisEpoch;
      step.globalStep = globalStep_;
      step.learningRate = lr;
      step.stepsLeft = stepsThisEpoch - steps;
      if (options_.maxSteps > 0)
        step.stepsLeft = std::min(step.stepsLeft, options_.maxSteps - globalStep_);
      step.times = lastTimes_;
      step.skippedFor = skippedFor_;
      step.gradNorm = gradNorm_;
      skipped += skippedFor_.empty() ? 0 : 1;
      unread.push_back(step);
      if (!gpu_ || unread.size() >= options_.lossReadEvery || endsLossWindow(globalStep_))
        reportUnread();
      const bool stopsHere =
          end >= shard.size() || (options_.maxSteps > 0 && globalStep_ >= options_.maxSteps);
      if (options_.evalEvery > 0 && globalStep_ % options_.evalEvery == 0 && !stopsHere) {
        // The epoch's end evaluates anyway, and so does the end --max-steps
        // makes: not twice at one step.
        reportUnread();
        const Clock::time_point evaluationStart = Clock::now();
        StepEvaluation report{epoch, steps, stepsThisEpoch, globalStep_, evaluate(), 0.0, {}};
        report.seconds = secondsSince(evaluationStart);
        const EvaluationVerdict verdict = judge(report.test);
        if (options_.judgeEvaluation) report.best = verdict.best;
        if (verdict.stop) {  // reported, judged on and checkpointed as the epoch's end
          evaluatingSeconds += secondsSince(evaluationStart);
          stoppingEvaluation.emplace(report.test, verdict);
          checkpointed = false;  // a checkpointEvery write was of an earlier step
          break;
        }
        observer.onStepEvaluation(report);
        if (options_.onEvaluated) options_.onEvaluated(report.test, globalStep_, verdict);
        const double seconds = secondsSince(evaluationStart);
        evaluatingSeconds += seconds;
        longestEvaluation = std::max(longestEvaluation, seconds);
      }
      checkpointed = false;
      if (options_.checkpointEvery > 0 && globalStep_ % options_.checkpointEvery == 0 &&
          end < shard.size()) {
        checkpoint(epoch, consumed);
        checkpointed = true;
      }
      if ((options_.stopRequested || options_.paceWindowSeconds > 0 || options_.timeUp) &&
          globalStep_ >= nextCheckStep) {
        // Every rank must stop after the same step: agree on the signal, on
        // whether rank 0's clock says a pace report is due or the time limit
        // near (Note [Stopping before a time limit] in
        // launcher/time_limit.h), and on the next check's step.
        const double stepSeconds =
            secondsSince(lastCheck) / static_cast<double>(globalStep_ - lastCheckStep);
        lastCheck = Clock::now();
        lastCheckStep = globalStep_;
        longestStep = std::max(longestStep, stepSeconds);
        std::size_t stepsAhead = 0;
        bool timeUp = false;
        if (comm_.rank() == 0) {
          stepsAhead =
              stepsToNextCheck(stepSeconds, options_.stopCheckSeconds, options_.stopCheckEvery);
          if (options_.timeUp) {
            // On a GPU the host may have issued steps the device has yet
            // to run (their losses unread), and the stop's checkpoint
            // waits for them, and begins with a replica check.
            const bool evaluatesFirst =
                stepsThisEpoch - steps <= stepsAhead ||
                (options_.evalEvery > 0 &&
                 (globalStep_ / options_.evalEvery + 1) * options_.evalEvery <=
                     globalStep_ + stepsAhead);
            timeUp = options_.timeUp(static_cast<double>(stepsAhead + unread.size()) * longestStep +
                                     (evaluatesFirst ? longestEvaluation : 0.0) +
                                     (options_.onCheckpoint ? longestReplicaCheck : 0.0));
          }
        }
        std::int32_t agreed[4] = {options_.stopRequested ? options_.stopRequested() : 0,
                                  comm_.rank() == 0 && options_.paceWindowSeconds > 0 &&
                                      secondsSince(window.start) >= options_.paceWindowSeconds,
                                  timeUp, static_cast<std::int32_t>(stepsAhead)};
        comm_.allreduceSync(std::span<std::int32_t>(agreed), comm::ReduceOp::kMax);
        nextCheckStep = globalStep_ + static_cast<std::size_t>(agreed[3]);
        const std::int32_t signal = agreed[0];
        if (agreed[1] != 0 && signal == 0 && agreed[2] == 0) {
          reportUnread();
          observer.onPace(gatherPace(comm_, options_, epoch, globalStep_, window));
          window = Stretch(globalStep_ + 1, options_.quotaCgroup);
        }
        if (signal != 0 || agreed[2] != 0) {
          stoppedBy_ = signal;
          ended_ = signal != 0 ? RunEnd::kSignal : RunEnd::kTimeLimit;
          reportUnread();
          if (end < shard.size()) {
            if (!checkpointed) checkpoint(epoch, consumed);
          } else {
            checkpoint(epoch + 1, 0);
          }
          return;
        }
      }
    }
    reportUnread();
    const bool finished = samples >= shard.size();
    const double trainSeconds = secondsSince(epochStart) - evaluatingSeconds;
    double totals[2] = {lossSum, static_cast<double>(steps)};
    comm_.allreduceSync(std::span<double>(totals), comm::ReduceOp::kSum);

    EpochReport report;
    report.epoch = epoch;
    report.steps = steps;
    report.stepsInEpoch = stepsThisEpoch;
    report.trainLoss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    report.learningRate = learningRate(globalStep_ - 1);  // the epoch's last step
    report.trainSeconds = trainSeconds;
    report.skippedSteps = skipped;
    if (options_.clipGradNorm > 0) report.gradNorms = gradNorms;
    if (epochSteps.steps > 0) {
      const double n = static_cast<double>(epochSteps.steps);
      const PhaseTimes& t = epochSteps.sum;
      report.meanStep = {t.data / n, t.forward / n, t.backward / n, t.comm / n, t.optimizer / n};
    }
    report.samplesPerSecond =
        trainSeconds > 0 ? world * static_cast<double>(samples) / trainSeconds : 0;
    report.pace = gatherPace(comm_, options_, epoch, globalStep_, epochSteps);
    verifyReplicas();
    const Clock::time_point evaluationStart = Clock::now();
    EvaluationVerdict verdict;
    if (stoppingEvaluation) {
      std::tie(report.test, verdict) = *stoppingEvaluation;
    } else {
      report.test = evaluate();
      verdict = judge(report.test);
    }
    const double evaluationSeconds = secondsSince(evaluationStart);
    report.wallSeconds = secondsSince(epochStart);
    if (options_.judgeEvaluation) report.best = verdict.best;
    report.stoppedEarly = verdict.stop;
    observer.onEpoch(report);
    const Clock::time_point hookStart = Clock::now();
    if (options_.onEvaluated) options_.onEvaluated(report.test, globalStep_, verdict);
    longestEvaluation = std::max(longestEvaluation, evaluationSeconds + secondsSince(hookStart));
    if (finished) {
      checkpoint(epoch + 1, 0);
    } else if (!checkpointed) {
      checkpoint(epoch, consumed);  // stopped in mid-epoch (maxSteps, judgeEvaluation)
    }
    if (verdict.stop) {
      ended_ = RunEnd::kEarlyStop;
      return;
    }
    if (!finished) ended_ = RunEnd::kMaxSteps;  // the only other way out of an epoch's steps
  }
}

EvaluationVerdict Trainer::judge(const EvalResult& test) const {
  return options_.judgeEvaluation ? options_.judgeEvaluation(test, globalStep_)
                                  : EvaluationVerdict{};
}

EvalResult Trainer::evaluate() {
  return trainer::evaluate(comm_, model_, test_, options_.evalBatchSize, batches_,
                           options_.evalSamples);
}

}  // namespace ddp::trainer
