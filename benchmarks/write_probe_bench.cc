// write_probe_bench: how well the write --time-limit times at start-up
// (Note [The first write's time] in launcher/write_probe.h) predicts the
// writes it stands in for. For the default MLP and the large one
// (784-4096-4096-4096-10), each round times the probe for a checkpoint's
// bytes (and, before the first checkpoint staged in a copy, the copy's fresh
// memory, as ddp_train does), then the checkpoint itself as a stop writes
// it (CheckpointWriter, staged as given, from write() until the file is in
// place) and --save-model's weights (saveModel). Prints each round's times and the
// writes over the probe's prediction at its own rate (without
// kWriteProbeMargin); medians last.
//
//   build/benchmarks/write_probe_bench [DIR [ROUNDS [copy|direct]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/checkpoint_state.h"
#include "benchmarks/command_line.h"
#include "launcher/write_probe.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/mlp.h"
#include "trainer/sgd.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void measure(const std::string& dir, int rounds, ddp::trainer::CheckpointStaging staging,
             const char* name, const std::vector<std::size_t>& hidden) {
  using namespace ddp::trainer;
  ddp::benchmarks::CheckpointState state(hidden);
  auto& model = state.model;
  Sgd& sgd = state.sgd;
  std::uint64_t weights = 0;
  for (Parameter* p : model->parameters())
    weights += p->value.numel() * sizeof(float);
  const std::uint64_t checkpoint = 2 * weights;
  const std::string path = checkpointPath(dir, 1), modelPath = dir + "/model.safetensors";
  CheckpointWriter writer([](const std::string&, const TrainPosition&) {}, staging);
  std::vector<double> checkpointRatio, modelRatio, probeSeconds;
  for (int round = 0; round < rounds; ++round) {
    const auto probe = ddp::launcher::timeWrite(dir, checkpoint);
    if (!probe) std::exit(1);
    // At the probe's own rate: secondsFor() holds the margin. The first
    // checkpoint staged in a copy allocates it, which ddp_train times apart.
    const double rate = ddp::launcher::kWriteProbeMargin;
    const auto copy = round == 0 && staging == CheckpointStaging::kCopy
                          ? ddp::launcher::timeFreshMemory(checkpoint)
                          : std::nullopt;
    const double predictCheckpoint =
        (probe->secondsFor(checkpoint) + (copy ? copy->secondsFor(checkpoint) : 0.0)) / rate;
    const double predictModel = probe->secondsFor(weights) / rate;
    auto start = Clock::now();
    writer.write(path, *model, sgd, TrainPosition{}, {});
    writer.finish();
    const double wroteCheckpoint = secondsSince(start);
    start = Clock::now();
    saveModel(modelPath, *model);
    const double wroteModel = secondsSince(start);
    std::printf(
        "%-8s round %d: probe %.1f MiB %.3f s; checkpoint %.1f MiB %.3f s (%.2fx the "
        "prediction); weights %.1f MiB %.3f s (%.2fx)\n",
        name, round + 1, static_cast<double>(probe->bytes) / (1 << 20), probe->seconds,
        static_cast<double>(checkpoint) / (1 << 20), wroteCheckpoint,
        wroteCheckpoint / predictCheckpoint, static_cast<double>(weights) / (1 << 20), wroteModel,
        wroteModel / predictModel);
    probeSeconds.push_back(probe->seconds);
    checkpointRatio.push_back(wroteCheckpoint / predictCheckpoint);
    modelRatio.push_back(wroteModel / predictModel);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(modelPath);
  std::printf(
      "%-8s medians of %d rounds: probe %.3f s; the checkpoint took %.2fx the probe's prediction, "
      "the weights %.2fx (margin kept: %.1fx)\n",
      name, rounds, median(probeSeconds), median(checkpointRatio), median(modelRatio),
      ddp::launcher::kWriteProbeMargin);
}

constexpr ddp::bench::ToolText kText{
    "write_probe_bench", "usage: write_probe_bench [DIR [ROUNDS [copy|direct]]]\n",
    "How well the write --time-limit times at start-up predicts the writes it stands\n"
    "for: per round (ROUNDS, default 5), in DIR (default: the current directory), the\n"
    "probe, a checkpoint written as a stop writes it (staged in a copy, the default,\n"
    "or direct) and --save-model's weights, for the default MLP and the large one;\n"
    "each write over the probe's prediction, medians last.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 3);
  const std::string dir = ddp::bench::directoryArgument(args, 0, ".");
  const int rounds = ddp::bench::countArgument(args, 1, 1, 5, "ROUNDS");
  if (args.size() > 2 && args[2] != "copy" && args[2] != "direct")
    throw ddp::bench::BadCommandLine(args[2] + ": copy or direct");
  const bool direct = args.size() > 2 && args[2] == "direct";
  const auto staging =
      direct ? ddp::trainer::CheckpointStaging::kDirect : ddp::trainer::CheckpointStaging::kCopy;
  std::printf("write_probe_bench in %s, checkpoints staged %s\n", dir.c_str(),
              direct ? "direct" : "copy");
  measure(dir, rounds, staging, "default", {1024, 1024});
  measure(dir, rounds, staging, "large", {4096, 4096, 4096});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
