// checkpoint_bench: what writing and reading a checkpoint costs, and how much
// of it is the checksums (Note [Checksums in safetensors files] in
// trainer/safetensors.h), for the default MLP (784-1024-1024-10) and the large
// one (784-4096-4096-4096-10), each with its momentum buffers: the file
// --checkpoint-dir writes. Median of 7 rounds of: CRC-32 of every tensor
// alone, saveCheckpoint (checksums, write, fsync, rename), loadCheckpoint
// (from the page cache: the file was just written) in its three parts: read
// the file, parse it (checksums verified), restore into the model; and the
// same through the file's mapping, as loadSafetensors reads it (Note
// [Reading files through a mapping] in runtime/mapped_file.h): map and parse
// (checksums verified, pages released), restore (pages read again). Last,
// what a run pauses for while CheckpointWriter takes a checkpoint, staged
// in a copy or written directly into the file (Note [Checkpoints written in
// the background] in trainer/checkpoint_writer.h): write()'s time, and the
// time until the file is in place (finish()).
//
//   build/benchmarks/checkpoint_bench [DIR]    (default: the current directory)
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/checkpoint_state.h"
#include "benchmarks/command_line.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/mlp.h"
#include "trainer/sgd.h"

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void measure(const std::string& dir, const char* name, const std::vector<std::size_t>& hidden) {
  using namespace ddp::trainer;
  ddp::benchmarks::CheckpointState state(hidden);
  auto& model = state.model;
  Sgd& sgd = state.sgd;
  std::vector<const Tensor*> tensors;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < model->parameters().size(); ++i) {
    tensors.push_back(&model->parameters()[i]->value);
    tensors.push_back(&sgd.momentumBuffers()[i]);
  }
  for (const Tensor* t : tensors)
    bytes += t->numel() * sizeof(float);

  const std::string path = checkpointPath(dir, 1);
  std::vector<double> crc, save, read, parse, restore, mappedParse, mappedRestore;
  uLong sink = 0;
  for (int round = 0; round < 7; ++round) {
    auto start = Clock::now();
    for (const Tensor* t : tensors)
      sink ^= crc32_z(0, reinterpret_cast<const Bytef*>(t->data()), t->numel() * sizeof(float));
    crc.push_back(msSince(start));
    start = Clock::now();
    saveCheckpoint(path, *model, sgd, TrainPosition{}, {});
    save.push_back(msSince(start));
    start = Clock::now();
    auto bytes = std::make_shared<std::string>(readWholeFile(path));
    read.push_back(msSince(start));
    start = Clock::now();
    const SafetensorsFile file = parseSafetensors(bytes, path);
    parse.push_back(msSince(start));
    start = Clock::now();
    restoreCheckpoint(path, file, *model, sgd, {});
    restore.push_back(msSince(start));
    start = Clock::now();
    const SafetensorsFile mapped = loadSafetensors(path);
    mappedParse.push_back(msSince(start));
    start = Clock::now();
    restoreCheckpoint(path, mapped, *model, sgd, {});
    mappedRestore.push_back(msSince(start));
  }
  std::vector<double> pause[2], written[2];
  for (const CheckpointStaging staging : {CheckpointStaging::kCopy, CheckpointStaging::kDirect}) {
    const auto mode = static_cast<std::size_t>(staging == CheckpointStaging::kDirect);
    CheckpointWriter writer([](const std::string&, const TrainPosition&) {}, staging);
    for (int round = 0; round < 7; ++round) {
      const auto start = Clock::now();
      writer.write(path, *model, sgd, TrainPosition{}, {});
      pause[mode].push_back(msSince(start));
      writer.finish();
      written[mode].push_back(msSince(start));
    }
  }
  std::filesystem::remove(path);
  const double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf(
      "%-8s %9.1f %9.1f %9.1f %11.0f%% %9.1f %9.1f %9.1f %11.1f %11.1f %11.1f %11.1f %11.1f "
      "%11.1f   (crc %08lx)\n",
      name, mib, median(crc), median(save), 100.0 * median(crc) / median(save), median(read),
      median(parse), median(restore), median(mappedParse), median(mappedRestore), median(pause[0]),
      median(written[0]), median(pause[1]), median(written[1]), static_cast<unsigned long>(sink));
}

constexpr ddp::bench::ToolText kText{
    "checkpoint_bench", "usage: checkpoint_bench [DIR]\n",
    "What writing and reading a checkpoint (weights and momentum) of the default MLP\n"
    "and the large one costs, in DIR (default: the current directory): the checksums\n"
    "alone, the write, the read, parse and restore, the same through the file's\n"
    "mapping, and the pause a run takes while the checkpoint is written in the\n"
    "background, staged in a copy or direct. Median of 7 rounds, in ms.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 1);
  const std::string dir = ddp::bench::directoryArgument(args, 0, ".");
  std::printf("checkpoint_bench in %s: median of 7 rounds (ms)\n", dir.c_str());
  std::printf("%-8s %9s %9s %9s %12s %9s %9s %9s %11s %11s %11s %11s %11s %11s\n", "model", "MiB",
              "crc32", "save", "crc of save", "read", "parse", "restore", "map+parse", "restore",
              "copy pause", "written", "direct", "written");
  measure(dir, "default", {1024, 1024});
  measure(dir, "large", {4096, 4096, 4096});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
