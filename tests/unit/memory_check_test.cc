// The start-up memory check (Note [Refusing a model the node cannot hold]):
// what a rank needs, in closed form; what the node has, read from a fake
// /proc and cgroup tree; and host allocations that fail with a message.
#include "launcher/memory_check.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launcher/options.h"
#include "parse_args.h"
#include "runtime/error.h"
#include "runtime/heartbeat.h"
#include "runtime/memory.h"
#include "test_files.h"
#include "trainer/mlp.h"

namespace ddp::launcher {
namespace {

using ddp::testing::FakeRoot;
using ddp::testing::parseArgs;

// The default MLP, 784-1024-1024-10.
constexpr std::size_t kLayer0 = 784 * 1024 + 1024, kLayer2 = 1024 * 1024 + 1024,
                      kLayer4 = 1024 * 10 + 10;
constexpr std::size_t kParameters = kLayer0 + kLayer2 + kLayer4;  // 1,863,690

TEST(MemoryCheck, MlpParameterCountsMatchTheBuiltModel) {
  const std::vector<std::size_t> hidden = {5, 3};
  const auto counts = trainer::mlpParameterCounts(7, hidden, 2);
  EXPECT_EQ(counts, (std::vector<std::size_t>{7 * 5 + 5, 0, 5 * 3 + 3, 0, 3 * 2 + 2}));
  const auto model = trainer::buildMlp(7, hidden, 2, 1);
  ASSERT_EQ(model->size(), counts.size());
  for (std::size_t layer = 0; layer < counts.size(); ++layer) {
    std::size_t built = 0;
    for (trainer::Parameter* p : model->layer(layer).parameters())
      built += p->value.numel();
    EXPECT_EQ(built, counts[layer]) << "layer " << layer;
  }
}

TEST(MemoryCheck, CpuRankHoldsWeightsGradientsOptimizerStateAndOutputs) {
  const HostMemoryNeed need = hostMemoryNeed(parseArgs({}), trainer::Device::kCpu);
  EXPECT_EQ(need.parameters, kParameters);
  EXPECT_EQ(need.weights, 4 * kParameters);
  EXPECT_EQ(need.gradients, 4 * kParameters);
  EXPECT_EQ(need.optimizerState, 4 * kParameters);  // SGD's momentum
  // Each layer's output for an evaluation batch of 1000 rows, larger than
  // the training batch of 64.
  EXPECT_EQ(need.outputs, 4u * 1000 * (1024 + 1024 + 10));
  EXPECT_EQ(need.data, 0u);  // Fashion-MNIST's 55 MB are not counted
  EXPECT_EQ(need.total(), 12 * kParameters + 4u * 1000 * 2058);
  EXPECT_EQ(hostMemoryNeed(parseArgs({"--batch-size", "4000"}), trainer::Device::kCpu).outputs,
            4u * 4000 * 2058);
  // --eval-batch-size sets the evaluation's rows; the larger batch counts.
  EXPECT_EQ(hostMemoryNeed(parseArgs({"--eval-batch-size", "5000"}), trainer::Device::kCpu).outputs,
            4u * 5000 * 2058);
  EXPECT_EQ(hostMemoryNeed(parseArgs({"--eval-batch-size", "10"}), trainer::Device::kCpu).outputs,
            4u * 64 * 2058);
}

// Note [Evaluating without training]: the weights and an evaluation batch's
// outputs, no gradients, optimizer state or checkpoint copy, and of
// synthetic data the test set alone.
TEST(MemoryCheck, AnEvaluationHoldsTheWeightsAndOneEvaluationBatch) {
  const Options o = parseArgs({"--evaluate", "--init-from", "w.safetensors", "--batch-size", "4000",
                               "--optimizer", "adamw", "--checkpoint-dir", "ck"});
  const HostMemoryNeed need = hostMemoryNeed(o, trainer::Device::kCpu, true);
  EXPECT_EQ(need.gradients, 0u);
  EXPECT_EQ(need.optimizerState, 0u);
  EXPECT_EQ(need.outputs, 4u * 1000 * 2058);
  EXPECT_EQ(need.checkpointCopy, 0u);
  EXPECT_EQ(need.total(), 4 * kParameters + 4u * 1000 * 2058);
  // An evaluation's batch is --eval-batch-size, whatever --batch-size says.
  Options smaller = o;
  smaller.evalBatchSize = 100;
  EXPECT_EQ(hostMemoryNeed(smaller, trainer::Device::kCpu, true).outputs, 4u * 100 * 2058);
  const HostMemoryNeed synthetic =
      hostMemoryNeed(parseArgs({"--evaluate", "--init-from", "w.safetensors", "--dataset",
                                "synthetic", "--synthetic-samples", "1000"}),
                     trainer::Device::kCuda);
  EXPECT_EQ(synthetic.data, 250u * (784 * 4 + 4));
}

TEST(MemoryCheck, FrozenLayersAndNoMomentumNeedLess) {
  const HostMemoryNeed frozen =
      hostMemoryNeed(parseArgs({"--freeze", "0", "--momentum", "0"}), trainer::Device::kCpu);
  EXPECT_EQ(frozen.weights, 4 * kParameters);
  EXPECT_EQ(frozen.gradients, 4 * (kLayer2 + kLayer4));
  EXPECT_EQ(frozen.optimizerState, 0u);
}

TEST(MemoryCheck, AdamWKeepsTwoMomentsPerTrainableParameter) {
  const HostMemoryNeed need =
      hostMemoryNeed(parseArgs({"--optimizer", "adamw", "--freeze", "0"}), trainer::Device::kCpu);
  EXPECT_EQ(need.optimizerState, 2 * 4 * (kLayer2 + kLayer4));
}

// Note [Sharded optimizer state]: each of `world` ranks keeps 1/world of it
// (rounded up to whole elements); rank 0, writing checkpoints, gathers the
// whole of it, which the checkpoint writer keeps instead of copying (Note
// [Checkpoints written in the background]): a copy of the weights and the
// whole state, as unsharded. (Written directly, rank 0 holds neither: Note
// [Streaming a sharded optimizer's state].)
TEST(MemoryCheck, ShardedStateIsAWorldsPartPerRankAndWholeOnceForCheckpoints) {
  const Options o = parseArgs(
      {"--optimizer", "adamw", "--freeze", "0", "--shard-optimizer", "--checkpoint-dir", "ck"});
  const std::size_t trainable = kLayer2 + kLayer4;
  EXPECT_EQ(hostMemoryNeed(o, trainer::Device::kCpu, false, 3).optimizerState,
            2 * 4 * ((trainable + 2) / 3));
  EXPECT_EQ(hostMemoryNeed(o, trainer::Device::kCpu, false, 1).optimizerState, 2 * 4 * trainable);
  EXPECT_EQ(hostMemoryNeed(o, trainer::Device::kCpu, true, 3).checkpointCopy,
            4 * kParameters + 2 * 4 * trainable);
}

TEST(MemoryCheck, GpuRankHoldsOnlyTheWeightsOnTheHost) {
  const HostMemoryNeed need = hostMemoryNeed(parseArgs({}), trainer::Device::kCuda);
  EXPECT_EQ(need.total(), 4 * kParameters);
}

TEST(MemoryCheck, SyntheticDataCounts) {
  const HostMemoryNeed need = hostMemoryNeed(
      parseArgs({"--dataset", "synthetic", "--synthetic-samples", "1000"}), trainer::Device::kCuda);
  EXPECT_EQ(need.data, (1000u + 250u) * (784 * 4 + 4));
}

TEST(MemoryCheck, ShortfallOnlyWhenTheNodeCannotHoldItsRanks) {
  const HostMemoryNeed need = hostMemoryNeed(parseArgs({}), trainer::Device::kCpu);
  EXPECT_FALSE(memoryShortfall(need, 4, 4 * need.total(), "a"));
  const auto refusal = memoryShortfall(need, 4, 4 * need.total() - 1, "a");
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->find("host a cannot hold this run: each of its 4 ranks needs at least 29.2 "
                          "MiB (1.86 M parameters: 7.1 MiB of weights, 7.1 MiB of gradients"),
            std::string::npos)
      << *refusal;
  EXPECT_NE(refusal->find("116.7 MiB in all"), std::string::npos) << *refusal;
}

// With --checkpoint-dir, rank 0 also holds the copy checkpoints are written
// from (weights and optimizer state), once per job, GPU runs included: its
// node must hold that on top of its ranks.
TEST(MemoryCheck, RankZeroHoldsTheCheckpointCopyOnce) {
  const Options o = parseArgs({"--optimizer", "adamw", "--checkpoint-dir", "ck"});
  EXPECT_EQ(hostMemoryNeed(o, trainer::Device::kCpu).checkpointCopy, 0u);  // not rank 0
  EXPECT_EQ(hostMemoryNeed(parseArgs({}), trainer::Device::kCpu, true).checkpointCopy, 0u);
  for (const trainer::Device device : {trainer::Device::kCpu, trainer::Device::kCuda}) {
    const HostMemoryNeed need = hostMemoryNeed(o, device, true);
    EXPECT_EQ(need.checkpointCopy, 3 * 4 * kParameters);  // weights and two moments
    EXPECT_FALSE(memoryShortfall(need, 4, 4 * need.total() + need.checkpointCopy, "a"));
    const auto refusal = memoryShortfall(need, 4, 4 * need.total() + need.checkpointCopy - 1, "a");
    ASSERT_TRUE(refusal);
    EXPECT_NE(refusal->find("and rank 0 21.3 MiB more for the copy of the weights and optimizer "
                            "state that checkpoints are written from"),
              std::string::npos)
        << *refusal;
    EXPECT_TRUE(
        refusal->ends_with(", or checkpoints without the copy: --checkpoint-staging direct)"))
        << *refusal;
  }
}

// Note [Choosing where checkpoints are staged]: auto copies while the copy
// fits with a tenth of the room to spare, on the node and under a process
// limit, and while rank 0 may run on more than one CPU; it writes directly
// otherwise. copy and direct are as given. Sharded, auto always
// writes directly.
TEST(MemoryCheck, AutoStagesCheckpointsInACopyOnlyWhereItFitsWithRoomToSpare) {
  using trainer::CheckpointStaging;
  const trainer::Device cpu = trainer::Device::kCpu;
  const Options o = parseArgs({"--optimizer", "adamw", "--checkpoint-dir", "ck"});
  const HostMemoryNeed need = hostMemoryNeed(o, cpu, true);
  const std::size_t copy = need.checkpointCopy, run = 4 * need.total();
  ASSERT_EQ(copy, 3 * 4 * kParameters);
  const int cpus = 2;
  const auto staging = [&](const std::string& option, const HostMemoryNeed& n,
                           std::optional<std::size_t> available,
                           const std::optional<ProcessMemoryLimit>& limit) {
    return chooseStaging(option, n, 4, available, limit, cpu, false, cpus).staging;
  };
  // Just enough for the copy and its tenth to spare, then a little less.
  const auto fitting = static_cast<std::size_t>(static_cast<double>(run + copy) / 0.9) + 1;
  EXPECT_EQ(staging("auto", need, fitting, std::nullopt), CheckpointStaging::kCopy);
  EXPECT_EQ(staging("auto", need, fitting - 64, std::nullopt), CheckpointStaging::kDirect);
  EXPECT_EQ(chooseStaging("auto", need, 4, fitting - 64, std::nullopt, cpu, false, cpus).reason,
            StagingReason::kNoRoom);
  EXPECT_EQ(staging("auto", need, std::nullopt, std::nullopt),
            CheckpointStaging::kCopy);  // nothing known: as before
  EXPECT_EQ(staging("copy", need, run, std::nullopt), CheckpointStaging::kCopy);
  EXPECT_EQ(staging("direct", need, 100 * run, std::nullopt), CheckpointStaging::kDirect);
  // Under a process limit: one rank's run, the copy and OpenBLAS's buffer.
  ProcessMemoryLimit limit{"ulimit -v", "address space", std::size_t{4} << 30, 0};
  const auto room =
      static_cast<std::size_t>(static_cast<double>(need.total() + copy + kBlasBufferBytes) / 0.9) +
      1;
  limit.used = limit.limit - room;
  EXPECT_EQ(staging("auto", need, 100 * run, limit), CheckpointStaging::kCopy);
  limit.used += 64;
  EXPECT_EQ(staging("auto", need, 100 * run, limit), CheckpointStaging::kDirect);
  // A rank that writes no checkpoints has nothing to stage.
  const HostMemoryNeed other = hostMemoryNeed(o, cpu, false);
  EXPECT_EQ(staging("direct", other, run, limit), CheckpointStaging::kCopy);
  // Sharded, auto streams the state into the file wherever the copy would
  // fit; an explicit copy is kept.
  const StagingChoice sharded =
      chooseStaging("auto", need, 4, 100 * run, std::nullopt, cpu, true, cpus);
  EXPECT_EQ(sharded.staging, CheckpointStaging::kDirect);
  EXPECT_EQ(sharded.reason, StagingReason::kSharded);
  EXPECT_EQ(chooseStaging("copy", need, 4, 100 * run, std::nullopt, cpu, true, cpus).staging,
            CheckpointStaging::kCopy);
}

// Where rank 0 may run on one CPU only, the thread writing the copy out
// takes its time from the steps, and auto writes directly even with room
// for the copy; an explicit copy is kept, and GPU ranks keep the copy.
TEST(MemoryCheck, AutoWritesDirectlyWhereRankZeroMayRunOnOneCpuOnly) {
  using trainer::CheckpointStaging;
  const Options o = parseArgs({"--checkpoint-dir", "ck"});
  const HostMemoryNeed need = hostMemoryNeed(o, trainer::Device::kCpu, true);
  const std::size_t plenty = 100 * (need.total() + need.checkpointCopy);
  const auto choose = [&](const std::string& option, trainer::Device device, int cpus) {
    return chooseStaging(option, need, 2, plenty, std::nullopt, device, false, cpus);
  };
  const StagingChoice bound = choose("auto", trainer::Device::kCpu, 1);
  EXPECT_EQ(bound.staging, CheckpointStaging::kDirect);
  EXPECT_EQ(bound.reason, StagingReason::kOneCpu);
  EXPECT_EQ(bound.copyBytes, need.checkpointCopy);
  EXPECT_EQ(stagingNotice(bound, "vm"),
            str("checkpoint: rank 0 writes checkpoints into their files between steps, without a ",
                bytesString(static_cast<double>(need.checkpointCopy)),
                " copy: rank 0 may run on one CPU only, where a thread writing a copy out would "
                "take its time from the steps (--checkpoint-staging copy keeps the copy)"));
  // Two CPUs, even shared by two ranks: the copy (measured faster there).
  const StagingChoice unbound = choose("auto", trainer::Device::kCpu, 2);
  EXPECT_EQ(unbound.staging, CheckpointStaging::kCopy);
  EXPECT_EQ(unbound.reason, StagingReason::kCopyFits);
  EXPECT_FALSE(stagingNotice(unbound, "vm"));
  EXPECT_EQ(choose("copy", trainer::Device::kCpu, 1).staging, CheckpointStaging::kCopy);
  EXPECT_EQ(choose("auto", trainer::Device::kCuda, 1).staging, CheckpointStaging::kCopy);
  // Without room, the room is the reason given.
  EXPECT_EQ(
      chooseStaging("auto", need, 2, need.total(), std::nullopt, trainer::Device::kCpu, false, 1)
          .reason,
      StagingReason::kNoRoom);
}

// With --resume, rank 0 maps the checkpoint's file while the ranks restore
// from it, releasing each piece once sent (Note [Restoring a checkpoint from
// one rank]): no memory beyond a piece, so the node's check leaves it out,
// but address space and data segment, which a process limit caps. The other
// ranks map nothing.
TEST(MemoryCheck, RankZeroMapsTheFileItResumesFrom) {
  const Options resumed = parseArgs({"--optimizer", "adamw", "--resume", "ck.safetensors"});
  EXPECT_EQ(hostMemoryNeed(resumed, trainer::Device::kCpu).resumedFile, 0u);
  const HostMemoryNeed rankZero = hostMemoryNeed(resumed, trainer::Device::kCpu, true);
  EXPECT_EQ(rankZero.resumedFile, 3 * 4 * kParameters);
  EXPECT_EQ(rankZero.checkpointCopy, 0u);
  EXPECT_FALSE(memoryShortfall(rankZero, 4, 4 * rankZero.total(), "a"));

  ProcessMemoryLimit limit{"ulimit -d", "data segment", std::size_t{1} << 30, 0};
  limit.used = limit.limit - (rankZero.total() + kBlasBufferBytes);
  const auto refusal = processLimitShortfall(rankZero, trainer::Device::kCpu, limit, "a");
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->find("(57.6 MiB for the run, of which 21.3 MiB is rank 0's mapping of the "
                          "checkpoint it resumes from, and 128.0 MiB for OpenBLAS's work buffer)"),
            std::string::npos)
      << *refusal;
  limit.used -= rankZero.resumedFile;
  EXPECT_FALSE(processLimitShortfall(rankZero, trainer::Device::kCpu, limit, "a"));

  // Sharded over 4: the file holds all of the state, the ranks a quarter each.
  const Options sharded =
      parseArgs({"--optimizer", "adamw", "--resume", "ck.safetensors", "--shard-optimizer"});
  EXPECT_EQ(hostMemoryNeed(sharded, trainer::Device::kCpu, true, 4).resumedFile,
            3 * 4 * kParameters);
  EXPECT_EQ(hostMemoryNeed(sharded, trainer::Device::kCpu, false, 4).resumedFile, 0u);
  // Resuming and writing checkpoints: the file is unmapped before the copy
  // exists, so it is the larger of the two that counts.
  const Options both = parseArgs(
      {"--optimizer", "adamw", "--resume", "--checkpoint-dir", "ck", "--shard-optimizer"});
  const HostMemoryNeed writer = hostMemoryNeed(both, trainer::Device::kCpu, true, 4);
  EXPECT_EQ(writer.checkpointCopy, 3 * 4 * kParameters);
  EXPECT_EQ(writer.resumedFile, 3 * 4 * kParameters);
  limit.used = limit.limit - (writer.total() + writer.checkpointCopy + kBlasBufferBytes);
  EXPECT_FALSE(processLimitShortfall(writer, trainer::Device::kCpu, limit, "a"));
  limit.used += 1;
  EXPECT_TRUE(processLimitShortfall(writer, trainer::Device::kCpu, limit, "a"));
}

TEST(AvailableBytes, MemAvailablePlusFreeSwap) {
  FakeRoot root;
  root.write("proc/meminfo", "MemTotal: 4000 kB\nMemAvailable: 1000 kB\nSwapFree: 24 kB\n");
  EXPECT_EQ(availableBytes(root.path()), std::optional<std::size_t>(1024 * 1024));
}

TEST(AvailableBytes, TheTightestCgroupV2LimitAboveTheProcessWins) {
  FakeRoot root;
  root.write("proc/meminfo", "MemAvailable: 1000 kB\nSwapFree: 0 kB\n");
  root.write("proc/self/cgroup", "0::/job/step\n");
  root.write("sys/fs/cgroup/job/memory.max", "600000\n");  // a Slurm job's --mem
  root.write("sys/fs/cgroup/job/memory.current", "130000\n");
  // 30000 of it is cache of files read long ago: the kernel reclaims it first.
  root.write("sys/fs/cgroup/job/memory.stat", "anon 90000\nfile 40000\ninactive_file 30000\n");
  root.write("sys/fs/cgroup/job/step/memory.max", "max\n");
  root.write("sys/fs/cgroup/job/step/memory.current", "90000\n");
  EXPECT_EQ(availableBytes(root.path()), std::optional<std::size_t>(500000));
}

TEST(AvailableBytes, AnUnlimitedCgroupV1LeavesMemAvailable) {
  FakeRoot root;
  root.write("proc/meminfo", "MemAvailable: 1000 kB\n");
  root.write("proc/self/cgroup", "5:devices:/\n4:memory:/a\n0::/\n");
  root.write("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "9223372036854771712\n");
  root.write("sys/fs/cgroup/memory/a/memory.usage_in_bytes", "2000\n");
  EXPECT_EQ(availableBytes(root.path()), std::optional<std::size_t>(1000 * 1024));
  root.write("sys/fs/cgroup/memory/a/memory.limit_in_bytes", "5000\n");
  EXPECT_EQ(availableBytes(root.path()), std::optional<std::size_t>(3000));
  root.write("sys/fs/cgroup/memory/a/memory.stat", "cache 1500\ntotal_inactive_file 500\n");
  EXPECT_EQ(availableBytes(root.path()), std::optional<std::size_t>(3500));
}

TEST(AvailableBytes, UnknownWithoutMeminfo) {
  FakeRoot root;
  EXPECT_FALSE(availableBytes(root.path()));
}

// proc/self/limits as Linux writes it, with the two memory limits given.
std::string limitsFile(const std::string& addressSpace, const std::string& data) {
  return "Limit                     Soft Limit           Hard Limit           Units     \n"
         "Max cpu time              unlimited            unlimited            seconds   \n"
         "Max data size             " +
         data +
         "           unlimited            bytes     \n"
         "Max stack size            8388608              unlimited            bytes     \n"
         "Max address space         " +
         addressSpace + "           unlimited            bytes     \n";
}

TEST(ProcessMemoryLimit, AddressSpaceLimitLessWhatIsMapped) {
  FakeRoot root;
  root.write("proc/self/limits", limitsFile("1000000000", "unlimited"));
  root.write("proc/self/status", "VmPeak:\t 990000 kB\nVmSize:\t 900000 kB\nVmData:\t 5000 kB\n");
  const auto limit = processMemoryLimit(root.path());
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->name, "ulimit -v");
  EXPECT_EQ(limit->what, "address space");
  EXPECT_EQ(limit->limit, 1000000000u);
  EXPECT_EQ(limit->used, 900000u * 1024);
  EXPECT_EQ(limit->room(), 1000000000u - 900000u * 1024);
}

TEST(ProcessMemoryLimit, TheLimitWithLessRoomWins) {
  FakeRoot root;
  root.write("proc/self/status", "VmSize:\t 900000 kB\nVmData:\t 100000 kB\n");
  // 100 MB of address space left, 4.9 MB of data segment.
  root.write("proc/self/limits", limitsFile("1021600000", "107300000"));
  EXPECT_EQ(processMemoryLimit(root.path())->name, "ulimit -d");
  EXPECT_EQ(processMemoryLimit(root.path())->room(), 107300000u - 102400000u);
  // More data segment than address space left: the address space binds.
  root.write("proc/self/limits", limitsFile("1021600000", "307300000"));
  EXPECT_EQ(processMemoryLimit(root.path())->name, "ulimit -v");
  // A process already over its limit (it was lowered after the mapping) has no room.
  root.write("proc/self/limits", limitsFile("1000", "unlimited"));
  EXPECT_EQ(processMemoryLimit(root.path())->room(), 0u);
}

TEST(ProcessMemoryLimit, NoneWhenUnlimitedOrUnreadable) {
  FakeRoot root;
  EXPECT_FALSE(processMemoryLimit(root.path()));
  root.write("proc/self/limits", limitsFile("unlimited", "unlimited"));
  root.write("proc/self/status", "VmSize:\t 900000 kB\nVmData:\t 100000 kB\n");
  EXPECT_FALSE(processMemoryLimit(root.path()));
}

TEST(ProcessLimitShortfall, OneRankAndABlasBufferAgainstTheRoom) {
  const HostMemoryNeed need = hostMemoryNeed(parseArgs({}), trainer::Device::kCpu);
  ProcessMemoryLimit limit{"ulimit -v", "address space", std::size_t{1} << 30, 0};
  limit.used = limit.limit - (need.total() + kBlasBufferBytes);
  EXPECT_FALSE(processLimitShortfall(need, trainer::Device::kCpu, limit, "a"));
  limit.used += 1;
  const auto refusal = processLimitShortfall(need, trainer::Device::kCpu, limit, "a");
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->rfind("out of memory: on host a, ulimit -v limits each rank's address space "
                           "to 1.0 GiB; ",
                           0),
            0u)
      << *refusal;
  EXPECT_NE(refusal->find("a rank needs at least 157.2 MiB more (29.2 MiB for the run and 128.0 "
                          "MiB for OpenBLAS's work buffer), but 157.2 MiB is left"),
            std::string::npos)
      << *refusal;
  EXPECT_NE(refusal->find("raise the limit (ulimit -v unlimited"), std::string::npos) << *refusal;
  // The model fits, the buffer does not: the run would have hung in OpenBLAS.
  EXPECT_NE(refusal->find("OpenBLAS would spin for ever"), std::string::npos) << *refusal;
  limit.used = limit.limit - need.total() + 1;  // the model itself does not fit
  EXPECT_EQ(processLimitShortfall(need, trainer::Device::kCpu, limit, "a")->find("spin"),
            std::string::npos);
  // A GPU rank's steps run no host GEMM: no buffer counts.
  const HostMemoryNeed gpu = hostMemoryNeed(parseArgs({}), trainer::Device::kCuda);
  limit.used = limit.limit - gpu.total();
  EXPECT_FALSE(processLimitShortfall(gpu, trainer::Device::kCuda, limit, "a"));
  limit.used += 1;
  EXPECT_TRUE(processLimitShortfall(gpu, trainer::Device::kCuda, limit, "a"));
  // Rank 0's own limit must hold the checkpoints' copy too.
  const HostMemoryNeed writer =
      hostMemoryNeed(parseArgs({"--checkpoint-dir", "ck"}), trainer::Device::kCuda, true);
  limit.used = limit.limit - writer.total() - writer.checkpointCopy;
  EXPECT_FALSE(processLimitShortfall(writer, trainer::Device::kCuda, limit, "a"));
  limit.used += 1;
  const auto rankZero = processLimitShortfall(writer, trainer::Device::kCuda, limit, "a");
  ASSERT_TRUE(rankZero);
  EXPECT_NE(rankZero->find("(21.3 MiB for the run, of which 14.2 MiB is rank 0's copy for "
                           "checkpoints), but"),
            std::string::npos)
      << *rankZero;
  EXPECT_TRUE(
      rankZero->ends_with(", or write checkpoints without the copy (--checkpoint-staging direct)"))
      << *rankZero;
}

TEST(ProcessLimitWarning, WhenTheRoomCannotHoldMpisStartUp) {
  ProcessMemoryLimit limit{"ulimit -d", "data segment", std::size_t{1} << 30, 0};
  limit.used = limit.limit - kMpiStartBytes;
  EXPECT_FALSE(processLimitWarning(limit, "a"));
  limit.used += 1;
  const auto warning = processLimitWarning(limit, "a");
  ASSERT_TRUE(warning);
  EXPECT_EQ(*warning,
            "on host a, ulimit -d leaves each rank 320.0 MiB of its data segment before MPI "
            "starts, and MPI's start-up and the rank's threads take about 320.0 MiB: if MPI_Init "
            "fails, crashes or hangs below, raise the limit (ulimit -d unlimited, or the batch "
            "system's setting)");
}

TEST(AllocateZeroedHost, ZeroedAndAligned) {
  const auto memory = allocateZeroedHost(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory.get()) % 64, 0u);
  const auto* bytes = static_cast<const unsigned char*>(memory.get());
  for (std::size_t i = 0; i < 1000; ++i)
    ASSERT_EQ(bytes[i], 0) << i;
}

TEST(AllocateZeroedHost, AnImpossibleSizeSaysHowMuch) {
  try {
    allocateZeroedHost(std::size_t{1} << 60);
    FAIL() << "an exbibyte was allocated";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate 1048576.0 TiB"), std::string::npos)
        << e.what();
  }
}

// The sanitizers map terabytes of shadow memory: an address-space limit
// would stop them, not the allocation.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(AllocateZeroedHost, UnderAnAddressSpaceLimitNamesIt) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  std::ifstream status("/proc/self/status");
  std::string line;
  std::size_t vmSizeKb = 0;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) vmSizeKb = std::stoul(line.substr(7));
  ASSERT_GT(vmSizeKb, 0u);
  rlimit tight = old;
  tight.rlim_cur = vmSizeKb * 1024 + (std::size_t{64} << 20);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  std::string message;
  try {
    allocateZeroedHost(std::size_t{1} << 30);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_NE(message.find("cannot allocate 1.0 GiB of host memory (ulimit -v limits this "
                         "process's address space to "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(" of it is left)"), std::string::npos) << message;
}
#endif

// Zeroing a large buffer counts as progress for the watchdog (Note
// [Heartbeats of local work]): 600,000 synthetic samples' zero-fill alone
// once outlasted --timeout 1 and its grace, and the load was taken for a
// hang.
TEST(AllocateZeroedHost, SendsHeartbeatsWhileItZeroes) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double quiet = secondsSinceHeartbeat();  // infinite if nothing beat yet
  ASSERT_GE(quiet, 0.2);
  const std::size_t bytes = (std::size_t{96} << 20) + 100;  // not whole steps
  const auto memory = allocateZeroedHost(bytes);
  EXPECT_LT(secondsSinceHeartbeat(), 0.2);
  const auto* first = static_cast<const unsigned char*>(memory.get());
  EXPECT_EQ(first[0], 0);
  EXPECT_EQ(first[bytes - 1], 0);
}

}  // namespace
}  // namespace ddp::launcher
