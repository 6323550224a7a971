// ddp_train's option parsing: defaults, every invalid value rejected with the
// option named, --config files and DDP_* environment variables.
#include "launcher/options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ddp_config.h"
#include "launcher/fault_injection.h"
#include "launcher/run_config.h"
#include "launcher/version.h"
#include "runtime/error.h"
#include "runtime/str.h"
#include "test_files.h"
#include "trainer/evaluation.h"
#include "trainer/lr_schedule.h"
#include "trainer/mlp.h"
#include "trainer/synthetic_dataset.h"

namespace ddp::launcher {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ddp_train");
  args.push_back("--dataset=synthetic");  // no data directory needed
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

// Whether the ranks compare `name` = `value` (consistencyItems) for `o`.
bool ranksCompare(const Options& o, const std::string& name, const std::string& value) {
  const Data data{std::make_unique<trainer::SyntheticDataset>(8, 784, 10, 1, 0),
                  std::make_unique<trainer::SyntheticDataset>(2, 784, 10, 1, 1)};
  auto model = trainer::buildMlp(784, o.hidden, 10, 1);
  const comm::ConsistencyItems items = consistencyItems(o, *model, data);
  return std::find(items.begin(), items.end(), std::pair{name, value}) != items.end();
}

TEST(Options, Defaults) {
  const Options o = parse({});
  EXPECT_EQ(o.model, "mlp");
  EXPECT_EQ(o.hidden, (std::vector<std::size_t>{1024, 1024}));
  EXPECT_EQ(o.batchSize, 64u);
  EXPECT_EQ(o.evalBatchSize, 1000u);
  EXPECT_EQ(o.maxSteps, 0u);
  EXPECT_EQ(o.twoLevelAllreduce, "auto");
  EXPECT_FALSE(o.help);
}

TEST(Options, ValuesAreParsed) {
  const Options o = parse({"--hidden", "32,16,8", "--batch-size", "7", "--lr", "0.5", "--epochs=3",
                           "--no-shuffle", "--drop-last", "--seed", "9", "--max-steps", "11"});
  EXPECT_EQ(o.hidden, (std::vector<std::size_t>{32, 16, 8}));
  EXPECT_EQ(o.batchSize, 7u);
  EXPECT_DOUBLE_EQ(o.lr, 0.5);
  EXPECT_EQ(o.epochs, 3u);
  EXPECT_TRUE(o.noShuffle);
  EXPECT_TRUE(o.dropLast);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.maxSteps, 11u);
}

struct Invalid {
  std::vector<std::string> args;
  std::string mentions;
};

class InvalidOption : public ::testing::TestWithParam<Invalid> {};

TEST_P(InvalidOption, IsAUsageErrorNamingTheOption) {
  try {
    parse(GetParam().args);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().mentions), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InvalidOption,
    ::testing::Values(
        Invalid{{"--batch-size", "0"}, "--batch-size"},
        Invalid{{"--batch-size", "-4"}, "--batch-size"},
        Invalid{{"--batch-size", "abc"}, "batch-size"},
        Invalid{{"--batch-size", "16777217"}, "--batch-size must be at most 16777216"},
        Invalid{{"--eval-batch-size", "0"}, "--eval-batch-size must be a positive integer"},
        Invalid{{"--eval-every", "-1"}, "--eval-every"},
        Invalid{{"--metrics-every", "5"}, "--metrics-every needs --metrics FILE"},
        Invalid{{"--metrics", "m.jsonl", "--metrics-every", "-5"}, "--metrics-every"},
        Invalid{{"--eval-batch-size", "16777217"}, "--eval-batch-size must be at most 16777216"},
        Invalid{{"--hidden", "8,16777217"}, "--hidden"},
        Invalid{{"--synthetic-samples", "4294967297"}, "--synthetic-samples must be at most"},
        Invalid{{"--epochs", "0"}, "--epochs"}, Invalid{{"--lr", "0"}, "--lr"},
        Invalid{{"--lr", "-1"}, "--lr"}, Invalid{{"--momentum", "1"}, "--momentum"},
        Invalid{{"--weight-decay", "-0.1"}, "--weight-decay"},
        Invalid{{"--hidden", "10,,3"}, "--hidden"}, Invalid{{"--hidden", "10,-3"}, "--hidden"},
        Invalid{{"--model", "resnet"}, "--model"}, Invalid{{"--threads", "-1"}, "--threads"},
        Invalid{{"--max-steps", "-1"}, "--max-steps"}, Invalid{{"--log-every", "0"}, "--log-every"},
        Invalid{{"--timeout", "0"}, "--timeout"},
        Invalid{{"--time-limit", "90"},
                "(got '90'): a bare number is seconds to --timeout but minutes to sbatch --time, "
                "so give the unit"},
        Invalid{{"--evaluate"}, "--evaluate needs the weights to evaluate"},
        Invalid{{"--evaluate", "--init-from", "a", "--resume", "b"},
                "--resume FILE and --init-from both set the weights: give one of them (--resume "
                "without a FILE goes with --init-from"},
        Invalid{{"--init-from", "a", "--resume=b"}, "--resume FILE and --init-from"},
        Invalid{{"--time-limit", "0s"}, "--time-limit must be a positive duration"},
        Invalid{{"--time-limit", "1:3x:00"}, "--time-limit must be a positive duration"},
        Invalid{{"--time-limit", "soon"}, "(got 'soon')"},
        Invalid{{"--timeout", "0.0001"}, "--timeout must be at least 1 second"},
        Invalid{{"--timeout", "nan"}, "--timeout"},
        Invalid{{"--stall-warning", "0.5"}, "--stall-warning must be at least 1 second"},
        Invalid{{"--lr", "inf"}, "--lr must be positive and finite"},
        // float32 in the step: 1e40 would be infinite there, 1e-50 zero.
        Invalid{{"--lr", "1e40"}, "--lr must be positive and finite (within float32's range)"},
        Invalid{{"--lr", "1e-50"}, "--lr must be positive and finite (within float32's range)"},
        Invalid{{"--weight-decay", "inf"}, "--weight-decay must be 0, or positive and finite"},
        Invalid{{"--weight-decay", "1e-50"}, "--weight-decay must be 0, or positive and finite"},
        Invalid{{"--weight-decay", "1e39"}, "--weight-decay must be 0, or positive and finite"},
        Invalid{{"--clip-grad-norm", "-1"}, "--clip-grad-norm must be positive"},
        Invalid{{"--clip-grad-norm", "nan"}, "--clip-grad-norm"},
        Invalid{{"--clip-grad-norm", "1e-50"}, "--clip-grad-norm must be positive (within float32"},
        Invalid{{"--global-batch", "100", "--batch-size", "16"},
                "--global-batch 100 is not a multiple of --batch-size 16"},
        Invalid{{"--global-batch", "64", "--grad-accum", "2"},
                "--global-batch sets --grad-accum from the number of ranks: give one of them"},
        Invalid{{"--global-batch", "-64"}, "--global-batch"},
        Invalid{{"--frobnicate"}, "frobnicate"},
        Invalid{{"--config", "/nonexistent/ddp.cfg"}, "--config"},
        Invalid{{"--stall-warning", "0"}, "--stall-warning"},
        Invalid{{"--pace-check-every", "0.5"},
                "--pace-check-every must be 0 (epoch ends only) or at least 1 second (got 0.5)"},
        Invalid{{"--pace-check-every", "-1"}, "--pace-check-every"},
        Invalid{{"--pace-check-every", "nan"}, "--pace-check-every"},
        Invalid{{"--bucket-cap-mb", "fast"}, "--bucket-cap-mb"},
        Invalid{{"--bucket-cap-mb", "-1"}, "--bucket-cap-mb"},
        Invalid{{"--bucket-cap-mb", "5x"}, "--bucket-cap-mb"},
        Invalid{{"--inject-fault", "stall:1:5"}, "--inject-fault"},
        Invalid{{"--inject-fault", "crash:1:5"}, "--inject-fault"},
        Invalid{{"--inject-fault", "desync:-1:5"}, "--inject-fault"},
        Invalid{{"--inject-fault", "nonfinite:1:0"}, "--inject-fault"},
        Invalid{{"--inject-fault", "stall:0:3:-2"}, "--inject-fault"},
        Invalid{{"--keep-checkpoints", "-1"}, "--keep-checkpoints"},
        Invalid{{"--keep-checkpoints", "2"}, "--keep-checkpoints needs --checkpoint-dir"},
        Invalid{{"--checkpoint-staging", "direct"}, "--checkpoint-staging needs --checkpoint-dir"},
        Invalid{{"--checkpoint-dir", "ck", "--checkpoint-staging", "disk"},
                "--checkpoint-staging: unknown 'disk' (known: auto, copy, direct)"},
        Invalid{{"--optimizer", "adam"}, "--optimizer: unknown 'adam' (known: sgd, adamw)"},
        Invalid{{"--two-level-allreduce", "on"},
                "--two-level-allreduce: unknown 'on' (known: auto, off)"},
        Invalid{{"--optimizer", "adamw", "--momentum", "0.5"},
                "--momentum is --optimizer sgd's, but this run uses adamw (its --betas play "
                "momentum's part)"},
        Invalid{{"--betas", "0.8,0.99"}, "--betas is --optimizer adamw's, but this run uses sgd"},
        Invalid{{"--eps", "1e-6"}, "--eps is --optimizer adamw's"},
        Invalid{{"--optimizer", "adamw", "--betas", "0.9"}, "--betas takes two values B1,B2"},
        Invalid{{"--optimizer", "adamw", "--betas", "0.9,1"}, "each in [0, 1) (got '0.9,1')"},
        Invalid{{"--optimizer", "adamw", "--betas", "0.9,0.99,0.5"}, "--betas takes two values"},
        Invalid{{"--optimizer", "adamw", "--betas", "0.9,x"}, "--betas"},
        Invalid{{"--optimizer", "adamw", "--eps", "0"}, "--eps must be positive"},
        Invalid{{"--optimizer", "adamw", "--eps", "1e-50"}, "--eps must be positive"},
        Invalid{{"--optimizer", "adamw", "--eps", "1e40"}, "--eps must be positive"},
        Invalid{{"--no-bias-decay"}, "--no-bias-decay changes nothing without --weight-decay"}));

// inf, and anything too long for the clocks, is no limit: a finite value that
// a millisecond count and steady_clock::now() + it still hold.
TEST(Options, InfiniteWaitLimitsStayWithinTheClocks) {
  for (const char* value : {"inf", "1e30", "100000000"}) {
    const char* argv[] = {"ddp_train", "--timeout", value, "--stall-warning", value};
    const Options o = parseOptions(5, argv);
    EXPECT_EQ(o.timeoutSeconds, kNoWaitLimitSeconds) << value;
    EXPECT_EQ(o.stallWarningSeconds, kNoWaitLimitSeconds) << value;
    const auto limit = std::chrono::milliseconds(static_cast<long long>(o.timeoutSeconds * 1000));
    EXPECT_GT(std::chrono::steady_clock::now() + limit, std::chrono::steady_clock::now()) << value;
  }
  const char* argv[] = {"ddp_train", "--timeout", "1", "--stall-warning", "2.5"};
  const Options o = parseOptions(5, argv);
  EXPECT_EQ(o.timeoutSeconds, 1);
  EXPECT_EQ(o.stallWarningSeconds, 2.5);
}

TEST(Options, VersionNamesTheBuildAndTheLibraries) {
  const char* argv[] = {"ddp_train", "--version", "--batch-size", "0"};  // nothing else is read
  EXPECT_TRUE(parseOptions(4, argv).version);
  const std::string text = versionText();
  EXPECT_EQ(text.rfind("ddp_train " + ddpVersion() + "\nMPI: Open MPI v", 0), 0u) << text;
  EXPECT_NE(text.find("CUDA: "), std::string::npos) << text;
#if DDP_WITH_CUDA
  // Which cuBLAS a GPU run would open, though this process never needs it.
  EXPECT_NE(text.find("\ncuBLAS: "), std::string::npos) << text;
  EXPECT_NE(text.find("libcublas.so"), std::string::npos) << text;
  EXPECT_NE(text.find(" (opened by GPU runs only)\nNCCL: "), std::string::npos) << text;
#endif
}

TEST(Options, TheBuildIsTheFirstItemRanksCompare) {
  Data data{std::make_unique<trainer::SyntheticDataset>(8, 784, 10, 1, 0),
            std::make_unique<trainer::SyntheticDataset>(2, 784, 10, 1, 1)};
  const Options o = parse({"--hidden", "4"});
  auto model = trainer::buildMlp(784, o.hidden, 10, 1);
  const comm::ConsistencyItems items = consistencyItems(o, *model, data);
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items[0], (std::pair<std::string, std::string>{"ddp_train version", ddpVersion()}));
  EXPECT_EQ(ddpVersion().rfind(DDP_VERSION, 0), 0u) << ddpVersion();  // meson.build's version
  // A rank that shards while another does not would wait in an all-gather
  // the other never issues: the ranks compare the choice first.
  const comm::ConsistencyItems sharded =
      consistencyItems(parse({"--hidden", "4", "--shard-optimizer"}), *model, data);
  EXPECT_NE(std::find(sharded.begin(), sharded.end(),
                      std::pair<std::string, std::string>{"option --shard-optimizer", "1"}),
            sharded.end());
}

TEST(Options, ABatchLargerThanARanksShardIsWarnedAbout) {
  Options o;
  o.batchSize = 256;
  EXPECT_FALSE(batchWarning(o, 60000, 8));    // 7500 samples per rank
  EXPECT_FALSE(batchWarning(o, 256 * 4, 4));  // exactly one step
  EXPECT_EQ(batchWarning(o, 60000, 512),
            "--batch-size 256 asks for 256 samples per rank per step, but each of the 512 ranks "
            "gets 118 of the 60000 training samples per epoch: every step takes the whole shard, "
            "118 samples, not the batch asked for (--batch-size counts samples per rank; the "
            "global batch is that times the ranks)");
  o.dropLast = true;  // floor(60000 / 512)
  EXPECT_NE(batchWarning(o, 60000, 512)->find("gets 117 of"), std::string::npos);
  o.batchSize = 64;
  o.gradAccum = 4;
  EXPECT_FALSE(batchWarning(o, 8192, 1));
  ASSERT_TRUE(batchWarning(o, 200, 1));
  EXPECT_EQ(batchWarning(o, 200, 1)->rfind("--batch-size 64 x --grad-accum 4 asks for 256 ", 0),
            0u);
  EXPECT_NE(batchWarning(o, 200, 1)->find("but the one rank gets 200 of the 200"),
            std::string::npos);
}

TEST(Options, FaultInjectionIsParsed) {
  const FaultInjection stall = parseFaultInjection("stall:2:7:1.5");
  EXPECT_EQ(stall.kind, FaultInjection::Kind::kStall);
  EXPECT_EQ(stall.rank, 2);
  EXPECT_EQ(stall.step, 7u);
  EXPECT_DOUBLE_EQ(stall.seconds, 1.5);
  EXPECT_EQ(parseFaultInjection("desync:0:1").kind, FaultInjection::Kind::kDesync);
  EXPECT_EQ(parseFaultInjection("nonfinite:3:9").step, 9u);
  EXPECT_EQ(parseFaultInjection("").kind, FaultInjection::Kind::kNone);
  EXPECT_EQ(parseFaultInjection("stall:all:3:60").rank, FaultInjection::kAllRanks);
  EXPECT_THROW(parseFaultInjection("stall:any:3:60"), UsageError);
  EXPECT_THROW(parseFaultInjection("stall:all:3"), UsageError);
  EXPECT_EQ(parseFaultInjection("stall:all:0:60").step, 0u);    // while loading the data
  EXPECT_THROW(parseFaultInjection("slow:1:0:2"), UsageError);  // only a stall may be at start-up
  const FaultInjection hang = parseFaultInjection("hang:1:5:2.5");
  EXPECT_EQ(hang.kind, FaultInjection::Kind::kHang);
  EXPECT_EQ(hang.rank, 1);
  EXPECT_EQ(hang.step, 5u);
  EXPECT_DOUBLE_EQ(hang.seconds, 2.5);
  EXPECT_THROW(parseFaultInjection("hang:1:5"), UsageError);    // how long, too
  EXPECT_THROW(parseFaultInjection("hang:1:0:2"), UsageError);  // a step's collective
  const FaultInjection oom = parseFaultInjection("oom:all:5");
  EXPECT_EQ(oom.kind, FaultInjection::Kind::kOutOfMemory);
  EXPECT_EQ(oom.rank, FaultInjection::kAllRanks);
  EXPECT_EQ(oom.step, 5u);
  EXPECT_THROW(parseFaultInjection("oom:1:5:2"), UsageError);  // no duration
  EXPECT_THROW(parseFaultInjection("oom:1:0"), UsageError);    // a step's
}

TEST(Options, UnknownDatasetAndMissingDataDir) {
  const char* unknown[] = {"ddp_train", "--dataset", "cifar"};
  EXPECT_THROW(parseOptions(3, unknown), UsageError);
  try {
    parseOptions(3, unknown);
  } catch (const NodeUsageError&) {
    ADD_FAILURE() << "an unknown dataset is the same on every node";
  } catch (const UsageError&) {
  }
  // A file that another node may have: every node's first rank reports it.
  const char* missing[] = {"ddp_train", "--data-dir", "/nonexistent/dir"};
  try {
    parseOptions(3, missing);
    FAIL();
  } catch (const NodeUsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--data-dir"), std::string::npos);
  }
  const char* config[] = {"ddp_train", "--config", "/nonexistent/ddp.cfg"};
  EXPECT_THROW(parseOptions(3, config), NodeUsageError);
}

TEST(Options, ConfigFileUsesTheSameKeysAndLosesToTheCommandLine) {
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("run.cfg")) << "# a comment\nbatch-size = 16\nlr = 0.2\nhidden = 8,4\n";
  const Options o = parse({"--config", dir.file("run.cfg"), "--lr", "0.3"});
  EXPECT_EQ(o.batchSize, 16u);
  EXPECT_EQ(o.hidden, (std::vector<std::size_t>{8, 4}));
  EXPECT_DOUBLE_EQ(o.lr, 0.3);
}

TEST(Options, EnvironmentSetsOptionsBetweenCommandLineAndConfig) {
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("run.cfg")) << "batch-size = 16\nepochs = 4\n";
  setenv("DDP_BATCH_SIZE", "24", 1);
  setenv("DDP_UNRELATED_THING", "x", 1);  // not an option: ignored
  const Options o = parse({"--config", dir.file("run.cfg")});
  const Options cli = parse({"--batch-size", "8"});
  unsetenv("DDP_BATCH_SIZE");
  unsetenv("DDP_UNRELATED_THING");
  EXPECT_EQ(o.batchSize, 24u);
  EXPECT_EQ(o.epochs, 4u);
  EXPECT_EQ(cli.batchSize, 8u);
}

std::string usageErrorOf(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Options, WarmUpStepsAreParsedAndAWarmUpLongerThanTheRunIsWarnedAbout) {
  const Options o = parse({"--warmup-steps", "100", "--lr", "0.2"});
  EXPECT_EQ(o.warmupSteps, 100u);
  EXPECT_EQ(parse({}).warmupSteps, 0u);
  EXPECT_NE(usageErrorOf({"--warmup-steps", "-1"}).find("--warmup-steps"), std::string::npos);
  EXPECT_FALSE(warmupWarning(o, 101));
  EXPECT_FALSE(warmupWarning(parse({}), 5));
  EXPECT_EQ(warmupWarning(o, 50),
            "--warmup-steps 100 covers the whole run of 50 steps: the learning rate never reaches "
            "--lr 0.2 (the last step runs at 0.1)");
}

TEST(Options, MinLrEndsAFallingScheduleAndIsRecordedInCheckpoints) {
  const Options o = parse({"--lr-schedule", "linear", "--min-lr", "0.01"});
  EXPECT_EQ(o.minLr, 0.01);
  EXPECT_EQ(trainOptionsFrom(o).minLr, 0.01);
  EXPECT_EQ(trainOptionsFrom(o).lrSchedule, trainer::LrSchedule::kLinear);
  EXPECT_EQ(parse({}).minLr, 0.0);
  EXPECT_EQ(checkpointOptions(o).at("ddp.option.min-lr"), "0.01");
  EXPECT_EQ(checkpointOptions(parse({})).at("ddp.option.min-lr"), "0");
  EXPECT_EQ(parse({"--min-lr", "0.1"}).minLr, 0.1);  // as high as --lr: no fall
  EXPECT_EQ(usageErrorOf({"--lr-schedule", "constant", "--min-lr", "0.01"}),
            "--min-lr is where a falling --lr-schedule (cosine, linear) ends; constant never "
            "falls");
  EXPECT_EQ(usageErrorOf({"--min-lr", "0.2"}), "--min-lr must be in [0, --lr 0.1] (got 0.2)");
  EXPECT_EQ(usageErrorOf({"--min-lr", "-0.01"}), "--min-lr must be in [0, --lr 0.1] (got -0.01)");
  EXPECT_EQ(usageErrorOf({"--min-lr", "nan"}), "--min-lr must be in [0, --lr 0.1] (got nan)");
  // AdamW's default rate is the bound when --lr is not given.
  EXPECT_EQ(usageErrorOf({"--optimizer", "adamw", "--min-lr", "0.01"}),
            "--min-lr must be in [0, --lr 0.001] (got 0.01)");
}

TEST(Options, LrDecayStepsSetsTheFallsLengthApartFromTheRuns) {
  const Options o = parse({"--lr-decay-steps", "500", "--warmup-steps", "20"});
  EXPECT_EQ(o.lrDecaySteps, 500u);
  EXPECT_EQ(trainOptionsFrom(o).lrDecaySteps, 500u);
  EXPECT_EQ(parse({}).lrDecaySteps, 0u);
  // Like the run's length, it may change on resume: not recorded as a must-match.
  EXPECT_FALSE(resumeOptions(o).contains("ddp.option.lr-decay-steps"));
  EXPECT_EQ(usageErrorOf({"--lr-decay-steps", "-1"}).find("--lr-decay-steps"), 0u);
  EXPECT_EQ(usageErrorOf({"--lr-schedule", "constant", "--lr-decay-steps", "100"}),
            "--lr-decay-steps is how long a falling --lr-schedule (cosine, linear) falls; constant "
            "never falls");
  // A fall ending before the run leaves the rest at 0 unless --min-lr is given.
  EXPECT_FALSE(lrDecayWarning(o, 500));
  EXPECT_FALSE(lrDecayWarning(parse({}), 500));
  EXPECT_FALSE(lrDecayWarning(parse({"--lr-decay-steps", "500", "--min-lr", "0.01"}), 900));
  EXPECT_EQ(lrDecayWarning(o, 900),
            "--lr-decay-steps 500 ends the fall to --min-lr 0 before the run's 900 steps: its "
            "last 400 steps run at a learning rate of 0 and change nothing (give --min-lr, or "
            "--max-steps 500)");
  EXPECT_EQ(usageErrorOf({"--lr-decay-steps", "20", "--warmup-steps", "20"}),
            "--lr-decay-steps 20 counts the warm-up too: it must be more than --warmup-steps 20, "
            "or the rate would fall in no step");
}

// --metrics-every's lines carry every rank's mean loss: the Trainer averages
// over the ranks at those steps, and every rank must agree on them.
TEST(Options, MetricsEveryReachesTheTrainerAndIsCheckedAcrossRanks) {
  EXPECT_EQ(trainOptionsFrom(parse({"--metrics", "m.jsonl", "--metrics-every", "7"})).lossWindow,
            7u);
  EXPECT_EQ(trainOptionsFrom(parse({})).lossWindow, 0u);
  EXPECT_TRUE(ranksCompare(parse({"--hidden", "4", "--metrics", "m.jsonl", "--metrics-every", "7"}),
                           "option --metrics-every", "7"));
  EXPECT_TRUE(ranksCompare(parse({"--hidden", "4"}), "option --metrics-every", "0"));
}

TEST(Options, EvalSamplesReachesTheTrainerAndIsCheckedAgainstTheTestSet) {
  const Options o = parse({"--hidden", "4", "--eval-samples", "300"});
  EXPECT_EQ(o.evalSamples, 300u);
  EXPECT_EQ(trainOptionsFrom(o).evalSamples, 300u);
  EXPECT_EQ(parse({}).evalSamples, 0u);
  EXPECT_EQ(usageErrorOf({"--eval-samples", "-1"}).find("--eval-samples"), 0u);
  EXPECT_TRUE(ranksCompare(o, "option --eval-samples", "300"));
  const trainer::SyntheticDataset test(300, 784, 10, 1, 1);
  checkEvalSamples(o, test);          // all of it
  checkEvalSamples(parse({}), test);  // 0: all
  try {
    checkEvalSamples(parse({"--eval-samples", "301"}), test);
    FAIL() << "more than the test set was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--eval-samples 301 is more than the 300 samples of the test set synthetic/test "
                 "(0: all of them)");
  }
}

TEST(Options, FreezeNamesTheLayersWithParameters) {
  EXPECT_EQ(parse({"--hidden", "8,8", "--freeze", "layers.0,2"}).freezeLayers,
            (std::vector<std::size_t>{0, 2}));
  // Every one of them frozen leaves nothing to train (PyTorch's DDP refuses
  // such a model too); --evaluate trains nothing anyway.
  EXPECT_EQ(usageErrorOf({"--hidden", "8", "--freeze", "layers.0,2,0"}),
            "--freeze: every layer with parameters (layers.0 and layers.2) is frozen, so the run "
            "would train nothing");
  EXPECT_EQ(parse({"--hidden", "8", "--freeze", "0,2", "--evaluate", "--init-from", "w"})
                .freezeLayers.size(),
            2u);
  EXPECT_EQ(usageErrorOf({"--hidden", "8", "--freeze", "1"}),
            "--freeze: '1' is not a layer with parameters (the MLP's are layers.0 and layers.2)");
  EXPECT_EQ(usageErrorOf({"--hidden", "8,8", "--freeze", "6"}),
            "--freeze: '6' is not a layer with parameters (the MLP's are layers.0, layers.2 and "
            "layers.4)");
  EXPECT_EQ(usageErrorOf({"--hidden", "8,8,8,8", "--freeze", "layers.x"}),
            "--freeze: 'layers.x' is not a layer with parameters (the MLP's are layers.0, "
            "layers.2, ..., layers.8)");
}

// --save-best trains and keeps; every rank must agree on it, since each of
// its writes is a collective.
TEST(Options, SaveBestNeedsATrainingRunAndAFileOfItsOwn) {
  EXPECT_EQ(parse({"--save-best", "best.safetensors"}).saveBest, "best.safetensors");
  EXPECT_EQ(parse({}).saveBest, "");
  EXPECT_EQ(usageErrorOf({"--save-best", "b.st", "--evaluate", "--init-from", "m.st"}),
            "--save-best keeps the best weights of a training run: --evaluate does not train");
  EXPECT_EQ(usageErrorOf({"--save-best", "m.st", "--save-model", "m.st"}),
            "--save-best and --save-model name the same file (m.st)");
  EXPECT_TRUE(
      ranksCompare(parse({"--hidden", "4", "--save-best", "b.st"}), "option --save-best", "1"));
  EXPECT_TRUE(ranksCompare(parse({"--hidden", "4"}), "option --save-best", "0"));
}

TEST(Options, EarlyStopCountsEvaluationsOfATrainingRun) {
  EXPECT_EQ(parse({"--early-stop", "3"}).earlyStop, 3u);
  EXPECT_EQ(parse({}).earlyStop, 0u);
  EXPECT_EQ(usageErrorOf({"--early-stop", "-1"}).find("--early-stop"), 0u);
  EXPECT_EQ(usageErrorOf({"--early-stop", "2", "--evaluate", "--init-from", "m.st"}),
            "--early-stop ends a training run: --evaluate does not train");
  EXPECT_TRUE(
      ranksCompare(parse({"--hidden", "4", "--early-stop", "3"}), "option --early-stop", "3"));
}

// Note [How much better counts for --early-stop] in launcher/best_evaluation.h.
TEST(Options, EarlyStopMinDeltaIsANonNegativeMarginForEarlyStop) {
  EXPECT_EQ(parse({"--early-stop", "3"}).earlyStopMinDelta, 0.0);
  EXPECT_EQ(parse({"--early-stop", "3", "--early-stop-min-delta", "0.005"}).earlyStopMinDelta,
            0.005);
  EXPECT_EQ(usageErrorOf({"--early-stop", "3", "--early-stop-min-delta", "-0.1"}),
            "--early-stop-min-delta must be 0 or more and finite (got -0.1)");
  EXPECT_EQ(usageErrorOf({"--early-stop", "3", "--early-stop-min-delta", "nan"}),
            "--early-stop-min-delta must be 0 or more and finite (got nan)");
  EXPECT_EQ(usageErrorOf({"--early-stop", "3", "--early-stop-min-delta", "inf"}),
            "--early-stop-min-delta must be 0 or more and finite (got inf)");
  EXPECT_EQ(usageErrorOf({"--save-best", "b.st", "--early-stop-min-delta", "0.01"}),
            "--early-stop-min-delta needs --early-stop (the patience it counts for)");
  EXPECT_TRUE(
      ranksCompare(parse({"--hidden", "4", "--early-stop", "3", "--early-stop-min-delta", "0.01"}),
                   "option --early-stop-min-delta", "0.01"));
}

TEST(Options, BestMetricIsTheTestLossOrAccuracyAndJudgesForAnOption) {
  EXPECT_EQ(parse({"--save-best", "b.st"}).bestMetric, "test_loss");
  EXPECT_EQ(parse({"--early-stop", "2", "--best-metric", "test_accuracy"}).bestMetric,
            "test_accuracy");
  EXPECT_EQ(usageErrorOf({"--save-best", "b.st", "--best-metric", "val_acc"}),
            "--best-metric: unknown 'val_acc' (known: test_loss, test_accuracy)");
  EXPECT_EQ(usageErrorOf({"--best-metric", "test_accuracy"}),
            "--best-metric needs --save-best or --early-stop (what it judges for)");
  EXPECT_TRUE(ranksCompare(
      parse({"--hidden", "4", "--save-best", "b.st", "--best-metric", "test_accuracy"}),
      "option --best-metric", "test_accuracy"));
}

// The Trainer's end-of-epoch evaluation takes --eval-batch-size, and
// nothing else does: the training batch stays --batch-size.
TEST(Options, EvalBatchSizeReachesTheTrainerAlone) {
  const trainer::TrainOptions t = trainOptionsFrom(parse({"--eval-batch-size", "250"}));
  EXPECT_EQ(t.evalBatchSize, 250u);
  EXPECT_EQ(t.batchSize, 64u);
  EXPECT_EQ(trainOptionsFrom(parse({})).evalBatchSize, trainer::kEvalBatchSize);
  EXPECT_EQ(trainOptionsFrom(parse({})).evalEvery, 0u);  // epoch ends only
  EXPECT_EQ(trainOptionsFrom(parse({"--eval-every", "200"})).evalEvery, 200u);
}

TEST(Options, GradientClippingIsOffUnlessAskedAndMayOnlyMeasure) {
  EXPECT_EQ(parse({}).clipGradNorm, 0.0);
  EXPECT_EQ(parse({"--clip-grad-norm", "1.5"}).clipGradNorm, 1.5);
  EXPECT_TRUE(std::isinf(parse({"--clip-grad-norm", "inf"}).clipGradNorm));
  EXPECT_EQ(trainOptionsFrom(parse({"--clip-grad-norm", "0.25"})).clipGradNorm, 0.25f);
}

// Without --lr and --weight-decay, AdamW gets PyTorch's defaults, not SGD's.
TEST(Options, AdamWDefaultsToPytorchsRateAndWeightDecay) {
  const Options adamw = parse({"--optimizer", "adamw"});
  EXPECT_EQ(adamw.lr, 1e-3);
  EXPECT_EQ(adamw.weightDecay, 0.01);
  const Options given = parse({"--optimizer", "adamw", "--lr", "0.05", "--weight-decay", "0"});
  EXPECT_EQ(given.lr, 0.05);
  EXPECT_EQ(given.weightDecay, 0.0);
  EXPECT_EQ(parse({}).lr, 0.1);
  EXPECT_EQ(parse({}).weightDecay, 0.0);
}

// Note [What may change on resume]: the batch's shape is recorded but free.
TEST(Options, ACheckpointRecordsTheBatchButAResumeMayChangeIt) {
  const Options o = parse({"--batch-size", "16", "--grad-accum", "2", "--seed", "7"});
  const trainer::CheckpointOptions recorded = checkpointOptions(o), mustMatch = resumeOptions(o);
  EXPECT_EQ(recorded.at("ddp.option.batch-size"), "16");
  EXPECT_EQ(recorded.at("ddp.option.grad-accum"), "2");
  EXPECT_FALSE(mustMatch.contains("ddp.option.batch-size"));
  EXPECT_FALSE(mustMatch.contains("ddp.option.grad-accum"));
  EXPECT_EQ(mustMatch.size(), recorded.size() - 2);
  for (const auto& [key, value] : mustMatch)
    EXPECT_EQ(recorded.at(key), value) << key;
  EXPECT_EQ(mustMatch.at("ddp.option.seed"), "7");
}

// --global-batch: the micro-batches per step follow from the world size.
TEST(Options, AGlobalBatchSetsTheMicroBatchesPerStep) {
  Options o = parse({"--global-batch", "96", "--batch-size", "16"});
  EXPECT_EQ(o.globalBatch, 96u);
  EXPECT_EQ(applyGlobalBatch(o, 3), std::nullopt);
  EXPECT_EQ(o.gradAccum, 2u);
  EXPECT_EQ(globalBatch(o, 3), 96u);
  EXPECT_EQ(applyGlobalBatch(o, 6), std::nullopt);
  EXPECT_EQ(o.gradAccum, 1u);
  EXPECT_EQ(applyGlobalBatch(o, 4),
            "--global-batch 96 cannot be shared by 4 ranks of --batch-size 16: it must be a "
            "multiple of 64 (16 x 4), e.g. 64 or 128");
  EXPECT_EQ(applyGlobalBatch(o, 12),
            "--global-batch 96 cannot be shared by 12 ranks of --batch-size 16: it must be a "
            "multiple of 192 (16 x 12), e.g. 192");
  Options plain = parse({"--grad-accum", "3"});
  EXPECT_EQ(applyGlobalBatch(plain, 4), std::nullopt);
  EXPECT_EQ(plain.gradAccum, 3u);
}

TEST(Options, TheGlobalBatchCountsMicroBatchesAndRanks) {
  EXPECT_EQ(globalBatch(parse({"--batch-size", "16", "--grad-accum", "2"}), 4), 128u);
  EXPECT_EQ(describeGlobalBatch(parse({"--batch-size", "32"}), 2), "64 (32 per rank x 2)");
  EXPECT_EQ(describeGlobalBatch(parse({"--batch-size", "16", "--grad-accum", "2"}), 4),
            "128 (2 micro-batches of 16 per rank x 4)");
}

TEST(Options, AdamWTakesBetasAndEpsAndRecordsThem) {
  const Options o = parse({"--optimizer", "adamw", "--betas", "0.8,0.95", "--eps", "1e-6"});
  EXPECT_EQ(o.beta1, 0.8);
  EXPECT_EQ(o.beta2, 0.95);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_EQ(checkpointOptions(o).at("ddp.option.optimizer"), "adamw betas 0.8,0.95 eps 1e-06");
  EXPECT_EQ(checkpointOptions(parse({})).at("ddp.option.optimizer"), "sgd");
  const std::size_t weights = countParameters(o).trainable * sizeof(float);
  EXPECT_EQ(optimizerStateBytes(o), 2 * weights);
  EXPECT_EQ(optimizerStateBytes(parse({})), weights);
  EXPECT_EQ(optimizerStateBytes(parse({"--momentum", "0"})), 0u);
  EXPECT_STREQ(buildOptimizer(o, {})->name(), "adamw");
  EXPECT_STREQ(buildOptimizer(parse({}), {})->name(), "sgd");
  // --shard-optimizer: ceil(trainable / world) elements of each kind per rank.
  const Options sharded = parse({"--optimizer", "adamw", "--shard-optimizer"});
  const std::size_t trainable = countParameters(sharded).trainable;
  EXPECT_EQ(optimizerStateBytesPerRank(sharded, 4), 2 * sizeof(float) * ((trainable + 3) / 4));
  EXPECT_EQ(optimizerStateBytesPerRank(o, 4), 2 * weights);  // unsharded: all of it
  EXPECT_EQ(optimizerStateBytes(sharded), 2 * weights);      // the checkpoint holds all of it
  EXPECT_EQ(checkpointOptions(parse({})).at("ddp.option.no-bias-decay"), "0");
  EXPECT_EQ(checkpointOptions(parse({"--weight-decay", "0.1", "--no-bias-decay"}))
                .at("ddp.option.no-bias-decay"),
            "1");
}

TEST(Options, ConfigFileWithAByteOrderMarkOrWindowsLineEnds) {
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("bom.cfg")) << "\xEF\xBB\xBF"
                                     << "batch-size = 16\nepochs = 3\n";
  EXPECT_EQ(parse({"--config", dir.file("bom.cfg")}).batchSize, 16u);
  std::ofstream(dir.file("crlf.cfg")) << "batch-size = 12\r\nepochs = 3\r\n";
  const Options crlf = parse({"--config", dir.file("crlf.cfg")});
  EXPECT_EQ(crlf.batchSize, 12u);
  EXPECT_EQ(crlf.epochs, 3u);
  std::ofstream(dir.file("short.cfg")) << "e";  // shorter than a mark: read as it is
  EXPECT_NE(usageErrorOf({"--config", dir.file("short.cfg")}).find("'e'"), std::string::npos);
}

// A switch written alone, as on the command line, is no 'key = value' line.
TEST(Options, ConfigFileLineWithoutAValueSaysHowToWriteASwitch) {
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("bare.cfg")) << "epochs = 2\nno-shuffle\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("bare.cfg")}),
            str("--config ", dir.file("bare.cfg"),
                ": the options configuration file contains an invalid line 'no-shuffle': each line "
                "is 'key = value', a switch too ('no-shuffle = true', 'resume = latest')"));
  std::ofstream(dir.file("set.cfg")) << "epochs = 2\nno-shuffle = true\n";
  EXPECT_TRUE(parse({"--config", dir.file("set.cfg")}).noShuffle);
}

// `--config /dev/zero` read one endless line until memory ran out; a file
// that big is no file of options. A pipe (`--config <(...)`) still works.
TEST(Options, ConfigFileThatNeverEndsIsRefusedAndAPipeIsRead) {
  EXPECT_NE(usageErrorOf({"--config", "/dev/zero"}).find("holds more than 1 MiB"),
            std::string::npos);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string text =
      "\xEF\xBB\xBF"
      "batch-size = 24\n";
  ASSERT_EQ(write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fds[1]);
  EXPECT_EQ(parse({"--config", str("/dev/fd/", fds[0])}).batchSize, 24u);
  close(fds[0]);
}

// A value the user did not type on the command line: the error says where it
// came from, as the variable or the file that set it.
TEST(Options, ErrorsNameTheSourceOfAValueNotOnTheCommandLine) {
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("zero.cfg")) << "batch-size = 0\n";
  std::ofstream(dir.file("bad.cfg")) << "epochs = many\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("zero.cfg")}),
            "--batch-size must be a positive integer (got 0); --batch-size was set by --config " +
                dir.file("zero.cfg"));
  EXPECT_EQ(
      usageErrorOf({"--config", dir.file("bad.cfg")}),
      "--config " + dir.file("bad.cfg") + ": the argument ('many') for option 'epochs' is invalid");
  EXPECT_EQ(usageErrorOf({"--config", dir.path()}),
            "--config: '" + dir.path() + "' is a directory, not a file");
  EXPECT_EQ(usageErrorOf({"--batch-size", "0"}), "--batch-size must be a positive integer (got 0)");

  setenv("DDP_CHECKPOINT_EVERY", "5", 1);
  setenv("DDP_TIMEOUT", "0.5", 1);
  const std::string needsDir = usageErrorOf({});
  const std::string timeout = usageErrorOf({"--checkpoint-dir", dir.path()});
  setenv("DDP_TIMEOUT", "soon", 1);
  const std::string badValue = usageErrorOf({"--checkpoint-dir", dir.path()});
  unsetenv("DDP_CHECKPOINT_EVERY");
  unsetenv("DDP_TIMEOUT");
  setenv("DDP_LR", "0.5", 1);  // named by no message below: --lr is not --lr-schedule
  const std::string schedule = usageErrorOf({"--lr-schedule", "linear"});
  unsetenv("DDP_LR");
  EXPECT_EQ(schedule.find("was set by"), std::string::npos) << schedule;
  EXPECT_EQ(needsDir,
            "--checkpoint-every needs --checkpoint-dir; --checkpoint-every was set by "
            "DDP_CHECKPOINT_EVERY in the environment");
  EXPECT_EQ(timeout,
            "--timeout must be at least 1 second, or inf for no limit (got 0.5); --timeout was "
            "set by DDP_TIMEOUT in the environment");
  EXPECT_EQ(badValue,
            "DDP_TIMEOUT in the environment: the argument ('soon') for option 'timeout' is "
            "invalid");
}

// A misspelt DDP_* variable is ignored, but not silently; other DDP_*
// variables (not near any option, or the Slurm template's DDP_TRAIN) are.
TEST(Options, MisspeltEnvironmentVariablesAreWarnedAbout) {
  setenv("DDP_BATCHSIZE", "32", 1);
  setenv("DDP_LR_SCHEDUEL", "constant", 1);
  setenv("DDP_TRAIN", "/opt/ddp/bin/ddp_train", 1);
  setenv("DDP_UNRELATED_THING", "x", 1);
  const Options o = parse({});
  unsetenv("DDP_BATCHSIZE");
  unsetenv("DDP_LR_SCHEDUEL");
  unsetenv("DDP_TRAIN");
  unsetenv("DDP_UNRELATED_THING");
  EXPECT_EQ(o.batchSize, 64u);  // ignored
  std::vector<std::string> warnings = o.warnings;
  std::sort(warnings.begin(), warnings.end());
  EXPECT_EQ(warnings,
            (std::vector<std::string>{
                "DDP_BATCHSIZE in the environment sets no option and is ignored: did you mean "
                "DDP_BATCH_SIZE?",
                "DDP_LR_SCHEDUEL in the environment sets no option and is ignored: did you mean "
                "DDP_LR_SCHEDULE?"}));
  EXPECT_TRUE(parse({}).warnings.empty());
}

// po leaves an empty value out of its message ("the argument for option
// '--epochs' is invalid"); it is named as empty, on the command line and in
// a config file.
TEST(Options, AnEmptyValueIsNamedAsSuch) {
  EXPECT_EQ(usageErrorOf({"--epochs", ""}), "option '--epochs' is given an empty value");
  EXPECT_EQ(usageErrorOf({"--lr", ""}), "option '--lr' is given an empty value");
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("empty.cfg")) << "epochs =\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("empty.cfg")}),
            str("--config ", dir.file("empty.cfg"), ": option 'epochs' is given an empty value"));
  EXPECT_EQ(usageErrorOf({"--epochs", "x"}), "the argument ('x') for option '--epochs' is invalid");
}

// A path or name given as "" (--checkpoint-dir "$UNSET", 'resume =') is
// refused: taken as not given, it would run without the checkpoints, the
// saved model or the resume asked for.
TEST(Options, AnEmptyTextValueIsRefusedNotTakenAsNotGiven) {
  for (const char* option : {"--checkpoint-dir", "--save-model", "--metrics", "--init-from"})
    EXPECT_EQ(usageErrorOf({option, ""}), str("option '", option, "' is given an empty value"));
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("empty.cfg")) << "checkpoint-dir = ckpt\nresume =\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("empty.cfg")}),
            str("option '--resume' is given an empty value; --resume was set by --config ",
                dir.file("empty.cfg")));
  EXPECT_EQ(parse({"--checkpoint-dir", "ckpt", "--resume"}).resume, "latest");
}

// DDP_EPOCHS= (or export DDP_LR=$LR with LR unset) is named, not taken as
// unset; an empty variable that is no option's stays someone else's.
TEST(Options, AnEmptyOptionVariableIsRefusedByName) {
  setenv("DDP_EPOCHS", "", 1);
  const std::string error = usageErrorOf({});
  unsetenv("DDP_EPOCHS");
  EXPECT_EQ(error, "DDP_EPOCHS in the environment is empty: give it a value, or unset it");
  setenv("DDP_UNRELATED_THING", "", 1);
  EXPECT_EQ(parse({}).epochs, 5u);
  unsetenv("DDP_UNRELATED_THING");
}

// An option ddp_train does not know: the one most likely meant is named,
// spelt as it is written where the mistake was (dashes on the command line,
// none in a config file); PyTorch scripts' --batch_size is the commonest.
TEST(Options, UnknownOptionsNameTheNearestOne) {
  EXPECT_EQ(usageErrorOf({"--batch_size", "32"}),
            "unrecognised option '--batch_size': did you mean --batch-size?");
  EXPECT_EQ(usageErrorOf({"--bach-size", "32"}),
            "unrecognised option '--bach-size': did you mean --batch-size?");
  EXPECT_EQ(usageErrorOf({"--LR", "0.1"}), "unrecognised option '--LR': did you mean --lr?");
  EXPECT_EQ(usageErrorOf({"--confg", "x"}),
            "unrecognised option '--confg': did you mean --config?");
  EXPECT_EQ(usageErrorOf({"--learning-rate", "0.1"}), "unrecognised option '--learning-rate'");
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("run.cfg")) << "lr_schedule = constant\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("run.cfg")}),
            "--config " + dir.file("run.cfg") +
                ": unrecognised option 'lr_schedule': did you mean lr-schedule?");
  std::ofstream(dir.file("run.cfg")) << "--epochs = 2\n";
  EXPECT_EQ(
      usageErrorOf({"--config", dir.file("run.cfg")}),
      "--config " + dir.file("run.cfg") + ": unrecognised option '--epochs': did you mean epochs?");
}

// Long options are taken by their full names only (Note [Options written in
// full]): a beginning of one is refused, naming every option it begins,
// where Boost alone took --res for --resume.
TEST(Options, AbbreviatedOptionsAreRefusedWithTheNamesTheyBegin) {
  EXPECT_EQ(usageErrorOf({"--res"}),
            "unrecognised option '--res' (options are not abbreviated): did you mean --resume?");
  EXPECT_EQ(usageErrorOf({"--time-l", "1h"}),
            "unrecognised option '--time-l' (options are not abbreviated): did you mean "
            "--time-limit?");
  EXPECT_EQ(usageErrorOf({"--checkpoint", "ck"}),
            "unrecognised option '--checkpoint' (options are not abbreviated): did you mean "
            "--checkpoint-dir, --checkpoint-every or --checkpoint-staging?");
  EXPECT_EQ(usageErrorOf({"--epoch=2"}),
            "unrecognised option '--epoch=2' (options are not abbreviated): did you mean "
            "--epochs?");
  // A full name that begins others is that option.
  EXPECT_EQ(parse({"--lr", "0.5"}).lr, 0.5);
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("run.cfg")) << "max = 3\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("run.cfg")}),
            "--config " + dir.file("run.cfg") +
                ": unrecognised option 'max' (options are not abbreviated): did you mean "
                "max-steps?");
}

// Names and values that look like the placeholders of po's messages are
// quoted as given, from every source (Note [Placeholders in po's messages]);
// before, each of these hung parseOptions.
TEST(Options, TextThatLooksLikeAPlaceholderIsQuotedAsGiven) {
  EXPECT_EQ(usageErrorOf({"--x%canonical_option%"}), "unrecognised option '--x%canonical_option%'");
  EXPECT_EQ(usageErrorOf({"--lr=%value%"}),
            "the argument ('%value%') for option '--lr' is invalid");
  EXPECT_EQ(usageErrorOf({"--epochs", "%value%%canonical_option%%"}),
            "the argument ('%value%%canonical_option%%') for option '--epochs' is invalid");
  ddp::testing::TempDir dir;
  std::ofstream(dir.file("run.cfg")) << "%option% = 1\n";
  EXPECT_EQ(usageErrorOf({"--config", dir.file("run.cfg")}),
            "--config " + dir.file("run.cfg") + ": unrecognised option '%option%'");
  setenv("DDP_TIMEOUT", "%value%", 1);
  const std::string fromEnvironment = usageErrorOf({});
  unsetenv("DDP_TIMEOUT");
  EXPECT_EQ(fromEnvironment,
            "DDP_TIMEOUT in the environment: the argument ('%value%') for option 'timeout' is "
            "invalid");
}

TEST(Options, PaceChecksWithinAnEpochCanBeTurnedOff) {
  EXPECT_DOUBLE_EQ(parse({}).paceCheckSeconds, 120.0);
  EXPECT_DOUBLE_EQ(parse({"--pace-check-every", "0"}).paceCheckSeconds, 0.0);
  EXPECT_DOUBLE_EQ(parse({"--pace-check-every", "inf"}).paceCheckSeconds, 0.0);
  EXPECT_DOUBLE_EQ(trainOptionsFrom(parse({"--pace-check-every", "30"})).paceWindowSeconds, 30.0);
}

// Note [Subnormal floats]: flushed unless asked, and compared between the
// ranks, whose replicas would otherwise drift apart below 2^-126. A resume
// may change it: a checkpoint does not record it.
TEST(Options, SubnormalsAreFlushedUnlessKeptAndTheRanksAgree) {
  EXPECT_FALSE(parse({}).keepSubnormals);
  const Options kept = parse({"--keep-subnormals"});
  EXPECT_TRUE(kept.keepSubnormals);
  EXPECT_TRUE(ranksCompare(kept, "option --keep-subnormals", "1"));
  EXPECT_EQ(checkpointOptions(kept), checkpointOptions(parse({})));
}

TEST(Options, TimeLimitTakesSbatchForms) {
  EXPECT_EQ(parse({}).timeLimitSeconds, 0.0);  // none
  EXPECT_EQ(parse({"--time-limit", "90m"}).timeLimitSeconds, 5400.0);
  EXPECT_EQ(parse({"--time-limit=1:30:00"}).timeLimitSeconds, 5400.0);
}

// Note [Resuming or starting from --init-from] in launcher/resume.h: the
// Slurm template's --resume (DDP_RESUME=latest) goes with --init-from.
TEST(Options, ResumeWithoutAFileGoesWithInitFrom) {
  const Options o =
      parse({"--init-from", "pretrained.safetensors", "--checkpoint-dir", "ck", "--resume"});
  EXPECT_EQ(o.resume, "latest");
  EXPECT_EQ(o.initFrom, "pretrained.safetensors");
}

// Note [Evaluating without training] in launcher/evaluate.h: every rank
// must evaluate, or none.
TEST(Options, EvaluateTakesAModelFileOrACheckpointAndRanksAgreeOnIt) {
  EXPECT_FALSE(parse({}).evaluate);
  EXPECT_TRUE(parse({"--evaluate", "--init-from", "m.safetensors"}).evaluate);
  const Options latest = parse({"--evaluate", "--checkpoint-dir", "ck", "--resume"});
  EXPECT_TRUE(latest.evaluate);
  EXPECT_EQ(latest.resume, "latest");
  EXPECT_TRUE(ranksCompare(latest, "option --evaluate", "1"));
  EXPECT_TRUE(ranksCompare(parse({}), "option --evaluate", "0"));
}

TEST(Options, HelpNeedsNothingElseAndListsEveryOption) {
  const char* argv[] = {"ddp_train", "--help", "--data-dir", "/nonexistent"};
  EXPECT_TRUE(parseOptions(4, argv).help);
  const std::string text = usageText();
  for (const char* option :
       {"--config",    "--dataset",          "--data-dir",      "--model",
        "--hidden",    "--epochs",           "--max-steps",     "--batch-size",
        "--lr",        "--momentum",         "--weight-decay",  "--seed",
        "--threads",   "--log-every",        "--log-all-ranks", "--save-model",
        "--init-from", "--metrics",          "--no-shuffle",    "--drop-last",
        "--timeout",   "--keep-checkpoints", "--time-limit",    "--evaluate"}) {
    EXPECT_NE(text.find(option), std::string::npos) << option;
  }
}

}  // namespace
}  // namespace ddp::launcher
