#include "launcher/options.h"

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "launcher/fault_injection.h"
#include "launcher/time_limit.h"
#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/evaluation.h"
#include "trainer/fashion_mnist.h"
#include "trainer/lr_schedule.h"
#include "trainer/tensor.h"

namespace ddp::launcher {
namespace po = boost::program_options;
namespace {

// Raw values as the user typed them; signed so that "-5" is caught by
// validation instead of wrapping around in an unsigned parse.
struct Raw {
  std::string hidden = "1024,1024";
  long long epochs = 5, maxSteps = 0, batchSize = 64, seed = 42, threads = 0, logEvery = 50;
  long long syntheticSamples = 8192;
  long long gradAccum = 1;
  long long evalBatchSize = 1000;
  long long evalSamples = 0;
  long long earlyStop = 0;
  long long evalEvery = 0;
  long long metricsEvery = 0;
  long long globalBatch = 0;
  long long checkpointEvery = 0;
  long long warmupSteps = 0;
  long long lrDecaySteps = 0;
  long long keepCheckpoints = 0;
  std::string freeze;
  std::string bucketCap = "25";
  std::string betas = "0.9,0.999";
  std::string timeLimit;
};

constexpr unsigned kHelpWidth = 100;

po::options_description describe(Options& o, Raw& raw, std::string& config) {
  po::options_description general("General", kHelpWidth, kHelpWidth / 2);
  general.add_options()("help,h", po::bool_switch(&o.help), "print this help and exit")(
      "version", po::bool_switch(&o.version),
      "print the version of ddp_train and of the libraries it runs on, and exit")(
      "config", po::value(&config)->value_name("FILE"),
      "read options from FILE: one 'key = value' per line, keys as the long options");
  po::options_description data("Data", kHelpWidth, kHelpWidth / 2);
  data.add_options()("dataset", po::value(&o.dataset)->value_name("NAME")->default_value(o.dataset),
                     "fashion-mnist | synthetic")(
      "data-dir",
      po::value(&o.dataDir)->value_name("DIR")->default_value(trainer::kDefaultFashionMnistDir),
      "directory with the Fashion-MNIST IDX files (.gz or plain)")(
      "synthetic-samples",
      po::value(&raw.syntheticSamples)->value_name("N")->default_value(raw.syntheticSamples),
      "training samples of --dataset synthetic (test: a quarter as many)")(
      "no-shuffle", po::bool_switch(&o.noShuffle), "visit samples in file order every epoch")(
      "drop-last", po::bool_switch(&o.dropLast),
      "drop the tail that does not divide among ranks instead of padding with repeats");
  po::options_description model("Model", kHelpWidth, kHelpWidth / 2);
  model.add_options()("model", po::value(&o.model)->value_name("NAME")->default_value(o.model),
                      "mlp")(
      "hidden", po::value(&raw.hidden)->value_name("W,W,...")->default_value(raw.hidden),
      "hidden layer widths of the MLP")(
      "init-from", po::value(&o.initFrom)->value_name("FILE"),
      "start from these weights (safetensors, PyTorch names; F16, BF16, F64 are converted) "
      "instead of a seeded init, or from a checkpoint's weights (a new run: --resume continues "
      "the old one)")("save-model", po::value(&o.saveModel)->value_name("FILE"),
                      "write the final weights to FILE (safetensors, loadable by PyTorch)")(
      "save-best", po::value(&o.saveBest)->value_name("FILE"),
      "after each evaluation (each epoch's end, --eval-every) that is the best of the run so far "
      "(--best-metric: the lowest test loss unless told), write the weights to FILE (as "
      "--save-model, recording the step and the evaluation), as Hugging Face's "
      "load_best_model_at_end and Lightning's ModelCheckpoint(monitor=\"val_loss\"): the best "
      "weights kept whatever --keep-checkpoints deletes (a resumed run goes on from the best "
      "its checkpoint records)")(
      "best-metric", po::value(&o.bestMetric)->value_name("NAME")->default_value(o.bestMetric),
      "test_loss | test_accuracy: what makes an evaluation the best for --save-best and "
      "--early-stop, a lower test loss or a higher test accuracy, as Lightning's monitor and "
      "mode and Hugging Face's metric_for_best_model (a tie is not better)")(
      "evaluate", po::bool_switch(&o.evaluate),
      "evaluate the weights a run with the same options would train from (--init-from FILE, or "
      "the checkpoint --resume names: FILE, or the newest in --checkpoint-dir) on the test set "
      "over all ranks, and exit without training (writes only --metrics, and --save-model: the "
      "weights evaluated)")(
      "checkpoint-dir", po::value(&o.checkpointDir)->value_name("DIR"),
      "write checkpoints (weights, optimizer state, position) to DIR at the end of each epoch")(
      "checkpoint-every", po::value(&raw.checkpointEvery)->value_name("N"),
      "also write a checkpoint every N steps")(
      "keep-checkpoints", po::value(&raw.keepCheckpoints)->value_name("N"),
      "after writing a checkpoint, delete the older ones beyond the newest N (0, the default: keep "
      "all)")(
      "checkpoint-staging",
      po::value(&o.checkpointStaging)->value_name("NAME")->default_value(o.checkpointStaging),
      "where rank 0 holds a checkpoint while a thread writes it and training goes on: copy (a "
      "copy in memory of its own, the shortest pause) | direct (written into the file between "
      "steps, no copy) | auto (copy when rank 0's node has room for it and rank 0 may run on "
      "more than one CPU, else direct)")(
      "resume", po::value(&o.resume)->value_name("FILE")->implicit_value("latest"),
      "continue from checkpoint FILE, or without FILE from the newest one in --checkpoint-dir "
      "(none yet: start fresh, or from --init-from's weights) (any world size: the rest of the "
      "epoch is re-sharded; --batch-size and --grad-accum may change, to keep the global batch)");
  po::options_description optimisation("Optimisation", kHelpWidth, kHelpWidth / 2);
  optimisation.add_options()("epochs",
                             po::value(&raw.epochs)->value_name("N")->default_value(raw.epochs),
                             "passes over the training set")(
      "max-steps", po::value(&raw.maxSteps)->value_name("N")->default_value(raw.maxSteps),
      "stop after N steps in all (0: no limit)")(
      "time-limit", po::value(&raw.timeLimit)->value_name("DURATION"),
      "stop before DURATION of wall time has passed since ddp_train started, as a signal stops "
      "it (a checkpoint with --checkpoint-dir, exit code 3), keeping time for the steps to the "
      "next stop check and the last writes, as long as the longest so far took (before the "
      "first checkpoint: 4x a write timed at start-up): 5400s, 90m, 1.5h, or as sbatch "
      "--time writes it, 1:30:00 or 1-00:00:00")(
      "batch-size", po::value(&raw.batchSize)->value_name("N")->default_value(raw.batchSize),
      "samples per rank per micro-batch (global batch = N x --grad-accum x ranks)")(
      "eval-batch-size",
      po::value(&raw.evalBatchSize)->value_name("N")->default_value(raw.evalBatchSize),
      "samples per rank per batch of the test-set evaluation at each epoch's end and under "
      "--evaluate, as the --test-batch-size of PyTorch's examples (the results "
      "do not depend on it beyond rounding; memory and speed do)")(
      "eval-every", po::value(&raw.evalEvery)->value_name("N")->default_value(raw.evalEvery),
      "also evaluate on the test set after every N-th step of the run, as Megatron-Core's "
      "--eval-interval (0: at each epoch's end only, which is always done)")(
      "eval-samples", po::value(&raw.evalSamples)->value_name("N")->default_value(raw.evalSamples),
      "evaluate on the test set's first N samples only (file order), at epoch ends, "
      "--eval-every and --evaluate, as Hugging Face's max_eval_samples: quicker evaluations "
      "of a large test set (0: all of it)")(
      "early-stop", po::value(&raw.earlyStop)->value_name("N")->default_value(raw.earlyStop),
      "end the run after N evaluations in a row (epoch ends, --eval-every) that were not better "
      "than the best before (--best-metric), as Lightning's EarlyStopping patience and Hugging "
      "Face's "
      "early_stopping_patience: a checkpoint there (--checkpoint-dir), --save-model, exit code 0 "
      "(0: never; a resumed run counts on from its checkpoint)")(
      "early-stop-min-delta",
      po::value(&o.earlyStopMinDelta)->value_name("X")->default_value(o.earlyStopMinDelta, "0"),
      "for --early-stop, an evaluation counts as better only when it beats the last one that "
      "counted by more than X (in the --best-metric's units: the accuracy is a fraction), as "
      "Lightning's and Keras's min_delta; --save-best still keeps any better weights")(
      "lr", po::value(&o.lr)->value_name("X")->default_value(o.lr, "0.1"),
      "learning rate (adamw: 0.001 unless given, as torch.optim.AdamW)")(
      "lr-schedule", po::value(&o.lrSchedule)->value_name("NAME")->default_value(o.lrSchedule),
      "constant | cosine | linear (cosine: from --lr down to --min-lr over the run along a half "
      "cosine, as PyTorch's CosineAnnealingLR; linear: along a straight line; both stepped "
      "every step)")("min-lr", po::value(&o.minLr)->value_name("X")->default_value(o.minLr, "0"),
                     "where cosine and linear end, in [0, --lr], as Megatron-Core's --min-lr and "
                     "CosineAnnealingLR's eta_min")(
      "lr-decay-steps",
      po::value(&raw.lrDecaySteps)->value_name("N")->default_value(raw.lrDecaySteps),
      "the steps of the run (warm-up included) over which cosine and linear fall to --min-lr, "
      "to stay there after, as Megatron-Core's --lr-decay-iters: a short run (--max-steps) then "
      "follows a long run's schedule (0: the whole run)")(
      "warmup-steps", po::value(&raw.warmupSteps)->value_name("N")->default_value(raw.warmupSteps),
      "raise the learning rate linearly to --lr over the first N steps, then follow "
      "--lr-schedule over the rest (for the large global batches of many ranks)")(
      "optimizer", po::value(&o.optimizer)->value_name("NAME")->default_value(o.optimizer),
      "sgd | adamw: the update rule, as torch.optim.SGD or torch.optim.AdamW")(
      "momentum", po::value(&o.momentum)->value_name("X")->default_value(o.momentum, "0.9"),
      "SGD momentum, in [0, 1) (sgd)")(
      "betas", po::value(&raw.betas)->value_name("B1,B2")->default_value(raw.betas),
      "decay rates of AdamW's running averages of the gradient and its square, each in [0, 1) "
      "(adamw)")("eps", po::value(&o.eps)->value_name("X")->default_value(o.eps, "1e-08"),
                 "added to AdamW's denominator, > 0 (adamw)")(
      "weight-decay", po::value(&o.weightDecay)->value_name("X")->default_value(o.weightDecay, "0"),
      "sgd: L2 penalty added to the gradients; adamw: decoupled, each step multiplies the weights "
      "by 1 - lr x X (adamw: 0.01 unless given, as torch.optim.AdamW)")(
      "no-bias-decay", po::bool_switch(&o.noBiasDecay),
      "--weight-decay leaves the biases alone, as GPT-2, llm.c and Megatron-Core train (in "
      "PyTorch: a second parameter group with weight_decay=0)")(
      "shard-optimizer", po::bool_switch(&o.shardOptimizer),
      "each rank keeps and updates 1/world of the optimizer state: the gradients are "
      "reduce-scattered, each rank receiving the part it updates, and the ranks all-gather the "
      "updated weights (ZeRO stage 1, Megatron-Core's distributed optimizer): the same results "
      "(on several GPUs, within float rounding), the state's memory divided by the world size, "
      "the same bytes communicated")(
      "clip-grad-norm",
      po::value(&o.clipGradNorm)->value_name("X")->default_value(o.clipGradNorm, "0"),
      "scale the averaged gradient down to L2 norm X (over all trainable parameters) when it is "
      "larger, before each update, as torch.nn.utils.clip_grad_norm_; the norm is shown with "
      "each progress line and epoch (inf: show it, never clip; 0: neither)")(
      "seed", po::value(&raw.seed)->value_name("N")->default_value(raw.seed),
      "seeds the model init, the data order and synthetic data");
  po::options_description distributed("Data parallelism", kHelpWidth, kHelpWidth / 2);
  distributed.add_options()(
      "bucket-cap-mb", po::value(&raw.bucketCap)->value_name("MB")->default_value(raw.bucketCap),
      "gradient bucket size: each bucket's all-reduce starts as soon as backward has written it "
      "(the first bucket is capped at 1 MiB; 0: one bucket per parameter; inf: one bucket, no "
      "overlap; auto: the first 21 steps (up to 61 when step times scatter) try 1, 5, 25, "
      "100 MiB and one bucket in turn, and keep the fastest)")(
      "grad-compression",
      po::value(&o.gradCompression)->value_name("NAME")->default_value(o.gradCompression),
      "none | bf16: all-reduce gradients as bfloat16 (half the bytes; pays between nodes; "
      "summed in float32 on one node, rounded at each addition between nodes and on GPUs)")(
      "two-level-allreduce",
      po::value(&o.twoLevelAllreduce)->value_name("WHEN")->default_value(o.twoLevelAllreduce),
      "auto | off: on CPUs across nodes with as many ranks on each, all-reduce in shared memory "
      "inside each node and with MPI between the nodes (auto), or with one MPI_Allreduce over "
      "every rank (off)")(
      "grad-accum", po::value(&raw.gradAccum)->value_name("K")->default_value(raw.gradAccum),
      "micro-batches of --batch-size per step; only the last one communicates (PyTorch's no_sync)")(
      "global-batch", po::value(&raw.globalBatch)->value_name("N")->default_value(raw.globalBatch),
      "samples per step over all ranks, kept at any world size: --grad-accum becomes N / "
      "(--batch-size x ranks), which must divide, as Megatron-Core's --global-batch-size (a run "
      "resumed on another number of ranks keeps its global batch; 0: --grad-accum decides)")(
      "freeze", po::value(&raw.freeze)->value_name("LAYER,..."),
      "layers whose parameters do not train and are never communicated, e.g. layers.0 or 0 "
      "(not all of them: the run would train nothing)");
  po::options_description runtime("Runtime and output", kHelpWidth, kHelpWidth / 2);
  runtime.add_options()(
      "device", po::value(&o.device)->value_name("NAME")->default_value(o.device),
      "auto | cpu | cuda: where each rank trains (auto: CUDA when a GPU is visible; one GPU per "
      "rank, NCCL between them)")(
      "threads", po::value(&raw.threads)->value_name("N")->default_value(raw.threads),
      "BLAS threads per rank; on GPUs, the threads that gather each batch (0: the CPUs this rank "
      "may run on, shared among the node's ranks that may run on them, at most their share of "
      "a container's CPU quota: 1 per rank when mpirun binds each to a core)")(
      "timeout",
      po::value(&o.timeoutSeconds)->value_name("SECONDS")->default_value(o.timeoutSeconds, "300"),
      "a collective not complete after this long ends the job, with a report of the ranks that "
      "did not arrive and where they are; so does a rank that makes no progress (no collective, "
      "step, evaluation batch or heartbeat of loading and saving) for this long plus a tenth, "
      "and a start-up (MPI_Init included) not done after this long, or 30 s if longer (inf: no "
      "limit)")(
      "stall-warning",
      po::value(&o.stallWarningSeconds)
          ->value_name("SECONDS")
          ->default_value(o.stallWarningSeconds, "60"),
      "warn about a collective waiting this long (at most half of --timeout), naming the ranks "
      "that have not arrived; ranks found in different collectives end the job as a desync, and "
      "a rank that has left training (its status server closed) ends it there too, as it will "
      "never arrive; one that said why it left ends it a second into the wait (inf: half of "
      "--timeout)")(
      "pace-check-every",
      po::value(&o.paceCheckSeconds)
          ->value_name("SECONDS")
          ->default_value(o.paceCheckSeconds, "120"),
      "also within an epoch, compare the ranks' compute per step this often and name a straggler "
      "or a rank whose CPUs other processes take (as at every epoch's end; 0: at epoch ends "
      "only)")(
      "skip-nonfinite", po::bool_switch(&o.skipNonFinite),
      "skip (and count) updates whose averaged gradients hold a NaN or infinity, instead of "
      "stopping with the step and the parameter (GPUs: checked and skipped on the device)")(
      "keep-subnormals", po::bool_switch(&o.keepSubnormals),
      "compute with subnormal floats (below 1.2e-38) as IEEE 754 and PyTorch do, instead of "
      "flushing them to zero on the CPU, where a step full of them (a dead net's) is 13x slower")(
      "log-every", po::value(&raw.logEvery)->value_name("N")->default_value(raw.logEvery),
      "progress line every N steps when stdout is not a terminal")(
      "log-all-ranks", po::bool_switch(&o.logAllRanks),
      "every rank prints its log lines, not only rank 0")(
      "trace", po::value(&o.trace)->value_name("PREFIX"),
      "write a Chrome trace of steps 6-15 per rank to PREFIX.rank<N>.json (forward, each layer's "
      "backward, each bucket's all-reduce); merge them with benchmarks/merge_traces.py")(
      "metrics", po::value(&o.metrics)->value_name("FILE"),
      "append one JSON line per epoch to FILE (and per --eval-every evaluation and "
      "--metrics-every steps), and a last one saying how the run ended (ended_by: epochs, "
      "max_steps, early_stop, time_limit, signal or error), its last step, the checkpoint to "
      "resume from and the best evaluation")(
      "metrics-every", po::value(&raw.metricsEvery)->value_name("N"),
      "also append a JSON line to --metrics after every N-th step of the run, for a training "
      "curve: over the steps since the previous one, the mean loss over all ranks (as "
      "Megatron-Core logs it; one all-reduce of one number a line), rank 0's step phases (and "
      "the gradient norms, with --clip-grad-norm)");
  po::options_description testing("Testing", kHelpWidth, kHelpWidth / 2);
  testing.add_options()(
      "inject-fault", po::value(&o.injectFault)->value_name("FAULT"),
      "make one rank misbehave, to see what ddp reports: stall:RANK:STEP:SECONDS (STEP 0: "
      "while loading the data), slow:RANK:STEP:SECONDS (that much slower in every step from STEP "
      "on), desync:RANK:STEP "
      "(one extra collective), nonfinite:RANK:STEP (NaN gradients), bitflip:RANK:STEP (one bit "
      "of its weights flipped), error:RANK:STEP (that rank fails alone), oom:RANK:STEP (out of "
      "memory: a tensor no device can hold) or "
      "hang:RANK:STEP:SECONDS (its first collective of STEP held that long where the library runs "
      "it: a network or library stuck in a collective); RANK may be all "
      "(stall:all:STEP:SECONDS: every rank stuck outside collectives; oom:all:STEP: every rank "
      "out of memory at once)");
  po::options_description all(kHelpWidth, kHelpWidth / 2);
  all.add(general)
      .add(data)
      .add(model)
      .add(optimisation)
      .add(distributed)
      .add(runtime)
      .add(testing);
  return all;
}

// The largest batch or layer width accepted, and the most synthetic samples:
// more is a typo, and the byte counts of tensors that size (width x width x
// 4, samples x 784 x 4) would overflow 64 bits.
constexpr long long kMaxDimension = 1LL << 24;
constexpr long long kMaxSamples = 1LL << 32;

std::size_t positive(long long value, const char* option, long long most = LLONG_MAX) {
  if (value <= 0)
    throw UsageError(str("--", option, " must be a positive integer (got ", value, ")"));
  if (value > most)
    throw UsageError(str("--", option, " must be at most ", most, " (got ", value, ")"));
  return static_cast<std::size_t>(value);
}

// The optimizer's numbers are float32 in the step: a positive value that
// rounds to 0 there would train (or decay) nothing, and one beyond its range
// would be infinite, both without a word.
bool positiveInFloat32(double value) {
  const auto narrowed = static_cast<float>(value);
  return narrowed > 0 && std::isfinite(narrowed);
}

std::size_t nonNegative(long long value, const char* option) {
  if (value < 0) throw UsageError(str("--", option, " must be zero or positive (got ", value, ")"));
  return static_cast<std::size_t>(value);
}

// --timeout and --stall-warning: at least a second, since start-up's own
// collectives can take that long and the limits count whole milliseconds; inf
// (or anything from kNoWaitLimitSeconds up) is no limit, held as that finite
// value because the clocks overflow when a near-infinite duration is added to
// now.
double waitLimit(double seconds, const char* option) {
  if (!(seconds >= 1)) {
    throw UsageError(
        str("--", option, " must be at least 1 second, or inf for no limit (got ", seconds, ")"));
  }
  return std::min(seconds, kNoWaitLimitSeconds);
}

// DDP_BATCH_SIZE -> batch-size; names that are not options are ignored.
std::string environmentName(const po::options_description& all, const std::string& variable) {
  if (variable.rfind("DDP_", 0) != 0) return "";
  std::string key = variable.substr(4);
  for (char& c : key)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return all.find_nothrow(key, false) != nullptr && key != "help" && key != "version" &&
                 key != "config"
             ? key
             : "";
}

// batch-size -> DDP_BATCH_SIZE, the inverse of environmentName.
std::string environmentVariable(const std::string& key) {
  std::string variable = "DDP_" + key;
  for (char& c : variable)
    c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return variable;
}

// Edits (insertions, deletions, substitutions) between `a` and `b`.
std::size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The option a name that is none most likely meant: the same name with
// underscores (--batch_size, as PyTorch scripts' argparse flags are often
// spelt) or another case, or one at most 2 edits away (--bach-size); "" if
// none is that close. `name` may carry leading dashes.
std::string closestOption(const po::options_description& all, const std::string& name) {
  std::string key = name.substr(std::min(name.find_first_not_of('-'), name.size()));
  for (char& c : key)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string closest;
  std::size_t distance = 3;  // at most 2 edits away
  for (const auto& option : all.options()) {
    const std::string& candidate = option->long_name();
    if (const std::size_t d = editDistance(key, candidate); d < distance) {
      distance = d;
      closest = candidate;
    }
  }
  return closest;
}

// A DDP_* variable that sets no option but is a typo away from one
// (DDP_BATCHSIZE) would be ignored without a word: warn, naming the option's
// variable. Variables further from every option are someone else's and pass
// silently, as does DDP_TRAIN (the Slurm template's binary), two edits from
// DDP_TRACE.
std::vector<std::string> misspeltVariables(const po::options_description& all) {
  std::vector<std::string> warnings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string assignment = *entry;
    const std::string variable = assignment.substr(0, assignment.find('='));
    if (variable.rfind("DDP_", 0) != 0 || variable == "DDP_TRAIN" ||
        !environmentName(all, variable).empty()) {
      continue;
    }
    const std::string closest = closestOption(all, variable.substr(4));
    if (!closest.empty() && closest != "help" && closest != "version" && closest != "config") {
      warnings.push_back(str(variable, " in the environment sets no option and is ignored: did ",
                             "you mean ", environmentVariable(closest), "?"));
    }
  }
  return warnings;
}

// The MLP's layers with parameters, for an error: "layers.0 and layers.2",
// "layers.0, layers.2 and layers.4", "layers.0, layers.2, ..., layers.8".
std::string linearLayerNames(std::size_t count) {
  const std::size_t last = count - 1;
  if (last == 0) return "layers.0";
  if (last == 2) return "layers.0 and layers.2";
  if (last == 4) return "layers.0, layers.2 and layers.4";
  return str("layers.0, layers.2, ..., layers.", last);
}

// A DDP_* variable set to nothing (DDP_EPOCHS=, or export DDP_LR=$LR with
// LR unset) is refused by name: po would say only that "the argument" is
// invalid, and taking it as unset would hide the script's mistake.
void refuseEmptyVariables(const po::options_description& all) {
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos || equals + 1 != text.size()) continue;
    const std::string variable(text.substr(0, equals));
    if (!environmentName(all, variable).empty()) {
      throw UsageError(str(variable, " in the environment is empty: give it a value, or unset it"));
    }
  }
}

// A text option given "" (--checkpoint-dir "$UNSET_VARIABLE", 'save-model ='
// in a config file) would mean "not given", silently: a run without the
// checkpoints or the file it was asked for. po takes "" as a string like
// any other, so it is refused here, as an empty number already is.
void refuseEmptyValues(const po::variables_map& vm) {
  for (const auto& [key, value] : vm) {
    const auto* text = boost::any_cast<std::string>(&value.value());
    if (!value.defaulted() && text != nullptr && text->empty())
      throw UsageError(str("option '--", key, "' is given an empty value"));
  }
}

// "layers.0,2" -> {0, 2}; each must name a Linear layer of the MLP (even
// indices: the ReLUs between them have no parameters).
std::vector<std::size_t> parseFreeze(const std::string& text, std::size_t hiddenLayers) {
  std::vector<std::size_t> layers;
  if (text.empty()) return layers;
  std::stringstream stream(text);
  std::string item;
  const std::size_t count = 2 * hiddenLayers + 1;
  while (std::getline(stream, item, ',')) {
    const std::string number = item.rfind("layers.", 0) == 0 ? item.substr(7) : item;
    std::size_t used = 0;
    long long index = -1;
    try {
      index = std::stoll(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != number.size() || number.empty() || index < 0 ||
        static_cast<std::size_t>(index) >= count || index % 2 != 0) {
      throw UsageError(str("--freeze: '", item, "' is not a layer with parameters (the MLP's are ",
                           linearLayerNames(count), ")"));
    }
    layers.push_back(static_cast<std::size_t>(index));
  }
  return layers;
}

}  // namespace

std::vector<std::size_t> parseSizeList(const std::string& text, const std::string& option) {
  std::vector<std::size_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || value <= 0 || value > kMaxDimension) {
      throw UsageError(str("--", option,
                           " must be a comma-separated list of positive integers up to ",
                           kMaxDimension, " (got '", text, "')"));
    }
    values.push_back(static_cast<std::size_t>(value));
  }
  if (values.empty()) throw UsageError(str("--", option, " must not be empty"));
  return values;
}

namespace {

// Where each option given outside the command line came from, for error
// messages: a user who never typed --batch-size should learn that
// DDP_BATCH_SIZE or a --config file set it.
using Origins = std::map<std::string, std::string>;

// Note [Placeholders in po's messages]: po::error_with_option_name::what()
// fills its template ("the argument ('%value%') for option
// '%canonical_option%' is invalid") by replacing each token until none is
// left, so a name or value that itself holds a token never comes back:
// `ddp_train --lr=%value%`, `--x%canonical_option%` or such a key in a
// --config file hung, the message growing without bound (Boost 1.74; found
// by fuzzing parseOptions). messageOf() swaps each '%' of the substitutions
// for a byte none of them holds before what() runs, and back in its result.
// The substitutions are protected: a member pointer named through a derived
// class reaches them without casting the caught object to a type it is not.
struct ExposedSubstitutions : po::error_with_option_name {
  using po::error_with_option_name::m_substitutions;
};

// What `error` says, whatever text the user gave (Note [Placeholders in po's
// messages]).
std::string messageOf(const po::error& error) {
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&error);
  if (!named) return error.what();
  // what() itself writes into the object (its cached message); a thrown
  // exception is never a const object, only caught as one.
  auto& substitutions =
      const_cast<po::error_with_option_name&>(*named).*(&ExposedSubstitutions::m_substitutions);
  // "--epochs ''", "epochs =" in a config file: po leaves the value out and
  // says only that "the argument" is invalid.
  const auto* invalid = dynamic_cast<const po::validation_error*>(&error);
  const auto value = substitutions.find("value");
  if (invalid != nullptr && invalid->kind() == po::validation_error::invalid_option_value &&
      value != substitutions.end() && value->second.empty()) {
    return str("option '", named->get_option_name(), "' is given an empty value");
  }
  std::string texts = named->m_error_template;
  bool placeholderLike = false;
  for (const auto& [key, value] : substitutions) {
    texts += value;
    placeholderLike = placeholderLike || value.find('%') != std::string::npos;
  }
  if (!placeholderLike) return error.what();
  char stand = 1;  // a control byte absent from every text involved
  while (texts.find(stand) != std::string::npos && stand < 31)
    ++stand;
  // Left swapped: what() on this object can no longer hang, whoever calls it.
  for (auto& [key, value] : substitutions)
    std::replace(value.begin(), value.end(), '%', stand);
  std::string message = error.what();
  std::replace(message.begin(), message.end(), stand, '%');
  return message;
}

// The options whose names `name` begins without being one (leading dashes
// and a "=VALUE" left out), as "--checkpoint-dir, --checkpoint-every or
// --checkpoint-staging"; "" if none.
std::string optionsBeginningWith(const po::options_description& all, const std::string& name,
                                 const std::string& dashes) {
  std::string key = name.substr(std::min(name.find_first_not_of('-'), name.size()));
  key = key.substr(0, key.find('='));
  if (key.empty() || all.find_nothrow(key, false) != nullptr) return "";
  std::vector<std::string> names;
  for (const auto& option : all.options()) {
    if (option->long_name().starts_with(key)) names.push_back(dashes + option->long_name());
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// po's message for an option it does not know, with the option most likely
// meant, spelt as it is written there: `dashes` is "--" on the command line,
// "" in a config file. A name that begins an option's is an abbreviation
// (Note [Options written in full]): the options it begins are named.
std::string unknownOptionMessage(const po::options_description& all, const po::unknown_option& e,
                                 const std::string& dashes) {
  const std::string completions = optionsBeginningWith(all, e.get_option_name(), dashes);
  if (!completions.empty()) {
    return str(messageOf(e), " (options are not abbreviated): did you mean ", completions, "?");
  }
  const std::string closest = closestOption(all, e.get_option_name());
  return closest.empty() ? messageOf(e)
                         : str(messageOf(e), ": did you mean ", dashes, closest, "?");
}

// Stores `parsed` under the options already set (earlier sources win) and
// notes where each option it newly sets came from: `originOf(key)`. po's own
// errors (a bad value, an unknown key) are prefixed with that origin too.
void storeFrom(const std::function<po::parsed_options()>& parse,
               const std::function<std::string(const std::string&)>& originOf,
               const po::options_description& all, po::variables_map& vm, Origins& origins) {
  try {
    const po::parsed_options parsed = parse();
    for (const po::option& option : parsed.options) {
      if (!vm.count(option.string_key) || vm[option.string_key].defaulted())
        origins[option.string_key] = originOf(option.string_key);
    }
    po::store(parsed, vm);
  } catch (const po::unknown_option& e) {  // only a config file names unknown keys
    throw UsageError(str(originOf(""), ": ", unknownOptionMessage(all, e, "")));
  } catch (const po::invalid_config_file_syntax& e) {  // a line without '='
    throw UsageError(str(originOf(""), ": ", messageOf(e),
                         ": each line is 'key = value', a switch too ('no-shuffle = true', "
                         "'resume = latest')"));
  } catch (const po::error_with_option_name& e) {
    std::string key = e.get_option_name();
    key.erase(0, key.find_first_not_of('-'));
    throw UsageError(str(originOf(key), ": ", messageOf(e)));
  } catch (const po::error& e) {
    throw UsageError(str(originOf(""), ": ", messageOf(e)));
  }
}

// Appends, for each option that `message` names and that did not come from
// the command line, where its value came from.
std::string withOrigins(const std::string& message, const Origins& origins) {
  std::string notes;
  for (const auto& [key, origin] : origins) {
    const std::string name = "--" + key;
    for (std::size_t at = message.find(name); at != std::string::npos;
         at = message.find(name, at + 1)) {
      const std::size_t after = at + name.size();
      if (after < message.size() &&
          (std::isalnum(static_cast<unsigned char>(message[after])) || message[after] == '-')) {
        continue;  // --lr is not --lr-schedule
      }
      notes += str("; ", name, " was set by ", origin);
      break;
    }
  }
  return message + notes;
}

Options validate(Options o, const Raw& raw, const po::variables_map& vm);

// A file of options is a few lines; more than this is some other file, or a
// device that never ends (`--config /dev/zero` read for ever, one line
// growing until memory ran out).
constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

// The text of `--config PATH`, without a byte-order mark (Windows editors
// write one, and it would become part of the first key). Pipes work
// (`--config <(...)`): the file is read, not sized.
std::string readConfigFile(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw NodeUsageError(str("--config: '", path, "' is a directory, not a file"));
  std::ifstream file(path, std::ios::binary);
  if (!file) throw NodeUsageError(str("--config: cannot read '", path, "'"));
  std::string text;
  char piece[16 * 1024];
  while (file.read(piece, sizeof piece) || file.gcount() > 0) {
    text.append(piece, static_cast<std::size_t>(file.gcount()));
    if (text.size() > kMaxConfigBytes) {
      throw NodeUsageError(str("--config: '", path, "' holds more than ", kMaxConfigBytes >> 20,
                               " MiB: not a file of options (one 'key = value' per line)"));
    }
  }
  if (file.bad()) throw NodeUsageError(str("--config: cannot read '", path, "'"));
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  return text;
}

}  // namespace

Options parseOptions(int argc, const char* const argv[]) {
  Options o;
  Raw raw;
  std::string config;
  const po::options_description all = describe(o, raw, config);
  po::variables_map vm;
  Origins origins;
  try {
    // Note [Options written in full].
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(all).style(style).run(), vm);
    if (vm.count("help") && vm["help"].as<bool>()) {
      o.help = true;
      return o;
    }
    if (vm.count("version") && vm["version"].as<bool>()) {
      o.version = true;
      return o;
    }
  } catch (const po::unknown_option& e) {
    throw UsageError(unknownOptionMessage(all, e, "--"));
  } catch (const po::error& e) {
    throw UsageError(messageOf(e));
  }
  refuseEmptyVariables(all);
  storeFrom(
      [&] {
        return po::parse_environment(all,
                                     [&](const std::string& v) { return environmentName(all, v); });
      },
      [](const std::string& key) {
        return key.empty() ? std::string("the environment")
                           : str(environmentVariable(key), " in the environment");
      },
      all, vm, origins);
  const std::vector<std::string> warnings = misspeltVariables(all);
  if (vm.count("config")) {
    const std::string path = vm["config"].as<std::string>();
    std::istringstream file(readConfigFile(path));
    storeFrom([&] { return po::parse_config_file(file, all); },
              [&](const std::string&) { return str("--config ", path); }, all, vm, origins);
  }
  try {
    po::notify(vm);
    refuseEmptyValues(vm);
    Options valid = validate(o, raw, vm);
    valid.warnings = warnings;
    return valid;
  } catch (const po::error& e) {
    throw UsageError(withOrigins(messageOf(e), origins));
  } catch (const NodeUsageError& e) {
    throw NodeUsageError(withOrigins(e.what(), origins));
  } catch (const UsageError& e) {
    throw UsageError(withOrigins(e.what(), origins));
  }
}

namespace {

// The whole of `text` as a number, or nullopt ("", "5x", "abc").
std::optional<double> parseNumber(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return value;
}

// Whether `key` was set by the user (command line, environment or --config)
// rather than left at its default.
bool given(const po::variables_map& vm, const char* key) {
  return vm.count(key) > 0 && !vm[key].defaulted();
}

// --optimizer and the options that belong to one of them: one given for the
// other optimizer is a mistake worth stopping for (it would do nothing).
void validateOptimizer(Options& o, const Raw& raw, const po::variables_map& vm) {
  if (o.optimizer != "sgd" && o.optimizer != "adamw") {
    throw UsageError(str("--optimizer: unknown '", o.optimizer, "' (known: sgd, adamw)"));
  }
  // torch.optim.AdamW's defaults where the user gave none: SGD's rate of 0.1
  // leaves AdamW at chance accuracy on the default MLP.
  if (o.optimizer == "adamw") {
    if (!given(vm, "lr")) o.lr = kAdamWDefaultLr;
    if (!given(vm, "weight-decay")) o.weightDecay = kAdamWDefaultWeightDecay;
  }
  const char* other = o.optimizer == "sgd" ? "adamw" : "sgd";
  for (const char* key : o.optimizer == "sgd" ? std::vector<const char*>{"betas", "eps"}
                                              : std::vector<const char*>{"momentum"}) {
    if (given(vm, key)) {
      throw UsageError(str("--", key, " is --optimizer ", other, "'s, but this run uses ",
                           o.optimizer,
                           o.optimizer == "adamw" ? " (its --betas play momentum's part)" : ""));
    }
  }
  const std::size_t comma = raw.betas.find(',');
  const std::optional<double> beta1 = parseNumber(raw.betas.substr(0, comma));
  const std::optional<double> beta2 =
      comma == std::string::npos ? std::nullopt : parseNumber(raw.betas.substr(comma + 1));
  for (const std::optional<double>& beta : {beta1, beta2}) {
    if (!beta || !(*beta >= 0 && *beta < 1)) {
      throw UsageError(
          str("--betas takes two values B1,B2, each in [0, 1) (got '", raw.betas, "')"));
    }
  }
  o.beta1 = *beta1;
  o.beta2 = *beta2;
  if (!positiveInFloat32(o.eps)) {
    throw UsageError(
        str("--eps must be positive and finite (within float32's range) (got ", o.eps, ")"));
  }
}

Options validate(Options o, const Raw& raw, const po::variables_map& vm) {
  o.epochs = positive(raw.epochs, "epochs");
  o.maxSteps = nonNegative(raw.maxSteps, "max-steps");
  if (given(vm, "time-limit")) {
    const auto seconds = parseDuration(raw.timeLimit);
    if (!seconds) {
      const bool bare = !raw.timeLimit.empty() &&
                        raw.timeLimit.find_first_not_of("0123456789.") == std::string::npos;
      throw UsageError(
          str("--time-limit must be a positive duration with its unit (5400s, 90m, 1.5h, 2d) or as "
              "sbatch --time writes it (1:30:00, 1-00:00:00) (got '",
              raw.timeLimit, "')",
              bare ? ": a bare number is seconds to --timeout but minutes to "
                     "sbatch --time, so give the unit"
                   : ""));
    }
    o.timeLimitSeconds = *seconds;
  }
  o.warmupSteps = nonNegative(raw.warmupSteps, "warmup-steps");
  o.earlyStop = nonNegative(raw.earlyStop, "early-stop");
  o.lrDecaySteps = nonNegative(raw.lrDecaySteps, "lr-decay-steps");
  o.batchSize = positive(raw.batchSize, "batch-size", kMaxDimension);
  o.evalBatchSize = positive(raw.evalBatchSize, "eval-batch-size", kMaxDimension);
  o.evalSamples = nonNegative(raw.evalSamples, "eval-samples");
  o.evalEvery = nonNegative(raw.evalEvery, "eval-every");
  o.logEvery = positive(raw.logEvery, "log-every");
  o.syntheticSamples = positive(raw.syntheticSamples, "synthetic-samples", kMaxSamples);
  o.seed = nonNegative(raw.seed, "seed");
  o.threads = static_cast<int>(nonNegative(raw.threads, "threads"));
  o.hidden = parseSizeList(raw.hidden, "hidden");
  o.gradAccum = positive(raw.gradAccum, "grad-accum");
  o.globalBatch = nonNegative(raw.globalBatch, "global-batch");
  if (o.globalBatch > 0) {
    if (given(vm, "grad-accum")) {
      throw UsageError(
          "--global-batch sets --grad-accum from the number of ranks: give one of them");
    }
    if (o.globalBatch % o.batchSize != 0) {
      throw UsageError(str("--global-batch ", o.globalBatch, " is not a multiple of --batch-size ",
                           o.batchSize, " (the samples of one rank's micro-batch)"));
    }
  }
  if (raw.bucketCap == "auto") {
    o.bucketCapAuto = true;
  } else {
    const std::optional<double> cap = parseNumber(raw.bucketCap);
    if (!cap || !(*cap >= 0)) {
      throw UsageError(
          str("--bucket-cap-mb must be >= 0, inf or auto (got '", raw.bucketCap, "')"));
    }
    o.bucketCapMb = *cap;
  }
  o.freezeLayers = parseFreeze(raw.freeze, o.hidden.size());
  if (std::set<std::size_t>(o.freezeLayers.begin(), o.freezeLayers.end()).size() ==
          o.hidden.size() + 1 &&
      !o.evaluate) {
    // PyTorch refuses it too: "DistributedDataParallel is not needed when a
    // module doesn't have any parameter that requires a gradient".
    throw UsageError(str("--freeze: every layer with parameters (",
                         linearLayerNames(2 * o.hidden.size() + 1),
                         ") is frozen, so the run would train nothing"));
  }
  if (o.gradCompression != "none" && o.gradCompression != "bf16") {
    throw UsageError(
        str("--grad-compression: unknown '", o.gradCompression, "' (known: none, bf16)"));
  }
  if (o.twoLevelAllreduce != "auto" && o.twoLevelAllreduce != "off") {
    throw UsageError(
        str("--two-level-allreduce: unknown '", o.twoLevelAllreduce, "' (known: auto, off)"));
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    throw UsageError(str("--device: unknown '", o.device, "' (known: auto, cpu, cuda)"));
  }
  if (o.device == "cuda" && !trainer::cudaBuild()) {
    throw UsageError(
        "--device cuda: this ddp_train was built without CUDA (the CUDA toolkit or NCCL was not "
        "found; see the summary of `meson setup`)");
  }
  o.checkpointEvery = nonNegative(raw.checkpointEvery, "checkpoint-every");
  if (o.checkpointEvery > 0 && o.checkpointDir.empty())
    throw UsageError("--checkpoint-every needs --checkpoint-dir");
  o.metricsEvery = nonNegative(raw.metricsEvery, "metrics-every");
  if (o.metricsEvery > 0 && o.metrics.empty())
    throw UsageError("--metrics-every needs --metrics FILE");
  o.keepCheckpoints = nonNegative(raw.keepCheckpoints, "keep-checkpoints");
  if (o.keepCheckpoints > 0 && o.checkpointDir.empty())
    throw UsageError("--keep-checkpoints needs --checkpoint-dir");
  if (o.checkpointStaging != "auto" && o.checkpointStaging != "copy" &&
      o.checkpointStaging != "direct") {
    throw UsageError(str("--checkpoint-staging: unknown '", o.checkpointStaging,
                         "' (known: auto, copy, direct)"));
  }
  if (!trainer::parseBestMetric(o.bestMetric)) {
    throw UsageError(
        str("--best-metric: unknown '", o.bestMetric, "' (known: test_loss, test_accuracy)"));
  }
  if (given(vm, "best-metric") && o.saveBest.empty() && o.earlyStop == 0)
    throw UsageError("--best-metric needs --save-best or --early-stop (what it judges for)");
  if (o.checkpointStaging != "auto" && o.checkpointDir.empty())
    throw UsageError("--checkpoint-staging needs --checkpoint-dir");
  if (o.resume == "latest" && o.checkpointDir.empty())
    throw UsageError("--resume without a FILE needs --checkpoint-dir (where to look for one)");
  // Note [Resuming or starting from --init-from] in launcher/resume.h.
  if (!o.resume.empty() && o.resume != "latest" && !o.initFrom.empty()) {
    throw UsageError(
        "--resume FILE and --init-from both set the weights: give one of them (--resume without "
        "a FILE goes with --init-from: the newest checkpoint in --checkpoint-dir when there is "
        "one, else --init-from's weights)");
  }
  if (!(o.earlyStopMinDelta >= 0 && std::isfinite(o.earlyStopMinDelta))) {
    throw UsageError(
        str("--early-stop-min-delta must be 0 or more and finite (got ", o.earlyStopMinDelta, ")"));
  }
  if (given(vm, "early-stop-min-delta") && o.earlyStop == 0)
    throw UsageError("--early-stop-min-delta needs --early-stop (the patience it counts for)");
  if (o.earlyStop > 0 && o.evaluate)
    throw UsageError("--early-stop ends a training run: --evaluate does not train");
  if (!o.saveBest.empty() && o.evaluate)
    throw UsageError(
        "--save-best keeps the best weights of a training run: --evaluate does not train");
  if (!o.saveBest.empty() && o.saveBest == o.saveModel)
    throw UsageError(str("--save-best and --save-model name the same file (", o.saveBest, ")"));
  if (o.evaluate && o.resume.empty() && o.initFrom.empty()) {
    throw UsageError(
        "--evaluate needs the weights to evaluate: --init-from FILE, --resume FILE, or "
        "--checkpoint-dir DIR --resume for the newest checkpoint in DIR");
  }
  if (!positiveInFloat32(o.lr)) {
    throw UsageError(
        str("--lr must be positive and finite (within float32's range) (got ", o.lr, ")"));
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    throw UsageError(str("--momentum must be in [0, 1) (got ", o.momentum, ")"));
  }
  validateOptimizer(o, raw, vm);
  if (!(o.weightDecay == 0 || positiveInFloat32(o.weightDecay))) {
    throw UsageError(
        str("--weight-decay must be 0, or positive and finite (within float32's range) (got ",
            o.weightDecay, ")"));
  }
  if (o.noBiasDecay && o.weightDecay == 0)
    throw UsageError("--no-bias-decay changes nothing without --weight-decay");
  // float32 as the gradients: a positive value that rounds to 0 would turn clipping off.
  if (!(o.clipGradNorm == 0 || static_cast<float>(o.clipGradNorm) > 0)) {
    throw UsageError(
        str("--clip-grad-norm must be positive (within float32's range), inf, or 0 "
            "for off (got ",
            o.clipGradNorm, ")"));
  }
  o.timeoutSeconds = waitLimit(o.timeoutSeconds, "timeout");
  o.stallWarningSeconds = waitLimit(o.stallWarningSeconds, "stall-warning");
  if (!(o.paceCheckSeconds == 0 || o.paceCheckSeconds >= 1)) {
    throw UsageError(
        str("--pace-check-every must be 0 (epoch ends only) or at least 1 second (got ",
            o.paceCheckSeconds, ")"));
  }
  if (std::isinf(o.paceCheckSeconds)) o.paceCheckSeconds = 0;
  parseFaultInjection(o.injectFault);  // throws UsageError naming the option
  const trainer::LrSchedule schedule =
      trainer::parseLrSchedule(o.lrSchedule);  // throws UsageError naming the option
  if (o.minLr != 0 && !trainer::decays(schedule)) {
    throw UsageError(str("--min-lr is where a falling --lr-schedule (cosine, linear) ends; ",
                         o.lrSchedule, " never falls"));
  }
  if (o.lrDecaySteps != 0 && !trainer::decays(schedule)) {
    throw UsageError(
        str("--lr-decay-steps is how long a falling --lr-schedule (cosine, linear) "
            "falls; ",
            o.lrSchedule, " never falls"));
  }
  if (o.lrDecaySteps != 0 && o.lrDecaySteps <= o.warmupSteps) {
    throw UsageError(str("--lr-decay-steps ", o.lrDecaySteps,
                         " counts the warm-up too: it must be more than --warmup-steps ",
                         o.warmupSteps, ", or the rate would fall in no step"));
  }
  if (!(o.minLr >= 0 && o.minLr <= o.lr)) {
    throw UsageError(str("--min-lr must be in [0, --lr ", o.lr, "] (got ", o.minLr, ")"));
  }
  if (o.model != "mlp")
    throw UsageError(str("--model: unknown model '", o.model, "' (known: mlp)"));
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    throw UsageError(
        str("--dataset: unknown dataset '", o.dataset, "' (known: fashion-mnist, synthetic)"));
  }
  if (o.dataset == "fashion-mnist" && !std::filesystem::is_directory(o.dataDir)) {
    throw NodeUsageError(str("--data-dir: '", o.dataDir, "' is not a directory",
                             o.dataDir == trainer::kDefaultFashionMnistDir
                                 ? " (install Debian's dataset-fashion-mnist, or pass --data-dir)"
                                 : ""));
  }
  return o;
}

}  // namespace

std::string usageText() {
  Options o;
  Raw raw;
  std::string config;
  std::ostringstream out;
  out << "Usage: mpirun -np N ddp_train [options]      (or: srun ddp_train [options])\n"
         "Data-parallel training: one process per CPU slot, gradients averaged over ranks.\n"
         "Options may also come from DDP_<OPTION> environment variables (DDP_BATCH_SIZE=32)\n"
         "and from --config FILE; the command line wins over both.\n"
      << describe(o, raw, config);
  return out.str();
}

}  // namespace ddp::launcher
