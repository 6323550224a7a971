// ddp_train's options: command line, DDP_* environment variables, --config file.
//
// Precedence: command line > environment (DDP_BATCH_SIZE=32 sets --batch-size)
// > config file (same keys as the long options, "batch-size = 32") > default.
// Parsing and validation need no MPI, so usage errors are reported before
// MPI starts, by rank 0 only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::launcher {

// --timeout inf: a limit of about three years, which still fits the clocks
// (steady_clock's nanoseconds) once added to now.
constexpr double kNoWaitLimitSeconds = 1e8;

// --optimizer adamw without --lr or --weight-decay: torch.optim.AdamW's defaults.
constexpr double kAdamWDefaultLr = 1e-3;
constexpr double kAdamWDefaultWeightDecay = 0.01;

struct Options {
  bool help = false;
  bool version = false;
  // data
  std::string dataset = "fashion-mnist";
  std::string dataDir;
  std::size_t syntheticSamples = 8192;
  bool noShuffle = false;
  bool dropLast = false;
  // model
  std::string model = "mlp";
  std::vector<std::size_t> hidden = {1024, 1024};
  std::string initFrom;
  std::string saveModel;
  // --save-best: after each evaluation of the run that is the best so far
  // (by bestMetric), the weights are written here (launcher/best_evaluation.h).
  std::string saveBest;
  std::string bestMetric = "test_loss";  // test_loss | test_accuracy (trainer::BestMetric)
  // --evaluate: the weights of initFrom or of the checkpoint `resume` names,
  // evaluated on the test set, no training (launcher/evaluate.h).
  bool evaluate = false;
  // checkpoints
  std::string checkpointDir;
  std::size_t checkpointEvery = 0;  // steps; 0: at the end of each epoch only
  std::size_t keepCheckpoints = 0;  // 0: keep every checkpoint
  std::string resume;               // "": start fresh; "latest": newest in checkpointDir; or a file
  std::string checkpointStaging = "auto";  // auto | copy | direct (trainer/checkpoint_writer.h)
  // optimisation
  std::size_t epochs = 5;
  std::size_t maxSteps = 0;
  double timeLimitSeconds = 0;  // 0: none (Note [Stopping before a time limit])
  std::size_t batchSize = 64;
  std::size_t evalBatchSize = 1000;  // trainer::kEvalBatchSize, as options_test checks
  std::size_t earlyStop = 0;         // evaluations in a row not better (0: never stop early)
  // How much better an evaluation must be to count for earlyStop (Note [How
  // much better counts for --early-stop] in launcher/best_evaluation.h).
  double earlyStopMinDelta = 0.0;
  std::size_t evalSamples = 0;  // the test set's first this many (0: all)
  std::size_t evalEvery = 0;    // steps; 0: evaluate at each epoch's end only
  double lr = 0.1;
  std::string lrSchedule = "cosine";
  double minLr = 0.0;             // where cosine and linear end (trainer/lr_schedule.h)
  std::size_t warmupSteps = 0;    // the learning rate's linear ramp
  std::size_t lrDecaySteps = 0;   // the fall's length (0: the run's)
  std::string optimizer = "sgd";  // sgd | adamw
  double momentum = 0.9;          // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  double weightDecay = 0.0;                       // adamw: kAdamWDefaultWeightDecay unless given
  bool noBiasDecay = false;                       // weight decay on the weight matrices only
  bool shardOptimizer = false;  // each rank keeps 1/world of the optimizer state (ZeRO-1)
  double clipGradNorm = 0.0;    // 0: off; inf: measure the norm, never clip
  std::uint64_t seed = 42;
  std::size_t gradAccum = 1;
  // --global-batch: samples per step over all ranks; when > 0, gradAccum
  // follows from it and the world size (applyGlobalBatch, launcher/run_config.h).
  std::size_t globalBatch = 0;
  // distributed
  double bucketCapMb = 25;                 // 0: one bucket per parameter
  bool bucketCapAuto = false;              // --bucket-cap-mb auto
  std::string gradCompression = "none";    // none | bf16
  std::string twoLevelAllreduce = "auto";  // auto | off (CommOptions::twoLevelAcrossNodes)
  std::vector<std::size_t> freezeLayers;   // indices into the Sequential
  // runtime
  std::string device = "auto";      // auto | cpu | cuda
  int threads = 0;                  // 0: cores on this node / ranks on this node
  double timeoutSeconds = 300;      // at most kNoWaitLimitSeconds: no limit
  double stallWarningSeconds = 60;  // capped at half the timeout
  double paceCheckSeconds = 120;    // 0: compare the ranks' pace at epoch ends only
  bool skipNonFinite = false;
  bool keepSubnormals = false;  // Note [Subnormal floats] in runtime/subnormals.h
  std::string injectFault;      // test only: launcher/fault_injection.h
  // output
  std::size_t logEvery = 50;
  bool logAllRanks = false;
  std::string metrics;
  std::size_t metricsEvery = 0;  // steps; 0: --metrics gets epoch (and evaluation) lines only
  std::string trace;             // prefix: rank r writes <trace>.rank<r>.json
  // For rank 0 to print once the job has started: DDP_* variables that look
  // like misspelt options.
  std::vector<std::string> warnings;
};

// Parses and validates. Throws UsageError with one line naming the option.
// Sets options.help (options.version) and returns early for --help (--version).
// Long options are written in full (Note [Options written in full]).
Options parseOptions(int argc, const char* const argv[]);

// Note [Options written in full]
// Boost.Program_options takes any unambiguous beginning of a long option
// for it (--res for --resume), as Python's argparse does by default. But a
// batch script outlives the option list it was written against: a later
// --resume-from would make its --res an error. And ddp_restart, which reads
// the command for --checkpoint-dir, --resume and --time-limit, saw no
// --time-limit in --time-l, so each restart got the whole limit again. So,
// as Megatron-LM does (argparse's allow_abbrev=False), ddp_train takes long
// options by their full names only, and refuses a beginning of names with
// the names it begins. Config keys and DDP_* variables were always matched
// in full.

// The --help text.
std::string usageText();

// A comma-separated list of positive integers ("1024,1024"). Throws UsageError
// naming `option`.
std::vector<std::size_t> parseSizeList(const std::string& text, const std::string& option);

}  // namespace ddp::launcher
