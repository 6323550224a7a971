// The start-up disk check (Note [Refusing files the disk cannot hold]): how
// many checkpoints a run writes and how large they are, in closed form; the
// verdict for a given room; and the room of a real directory.
#include "launcher/disk_check.h"

#include <gtest/gtest.h>

#include <fstream>

#include "launcher/options.h"
#include "parse_args.h"
#include "test_files.h"
#include "trainer/checkpoint.h"
#include "trainer/mlp.h"

namespace ddp::launcher {
namespace {

using ddp::testing::parseArgs;

constexpr std::uint64_t kMiB = 1 << 20;

TEST(DiskCheck, CheckpointsWrittenAtEpochEndsEveryNStepsAndTheStop) {
  // 3 epochs of 10 steps: the three epoch ends.
  EXPECT_EQ(checkpointsWritten(0, 30, 10, 0), 3u);
  // Every 4 steps: 4, 8, 12, 16, 24, 28 (20 is an epoch end) and 10, 20, 30.
  EXPECT_EQ(checkpointsWritten(0, 30, 10, 4), 9u);
  // Every 5 steps: 5, 15, 25 and the epoch ends 10, 20, 30.
  EXPECT_EQ(checkpointsWritten(0, 30, 10, 5), 6u);
  // --max-steps 25: epoch ends 10, 20 and the stop at 25.
  EXPECT_EQ(checkpointsWritten(0, 25, 10, 0), 3u);
  // ... every 5 steps: 5, 15, 25 (which is also the stop) and 10, 20.
  EXPECT_EQ(checkpointsWritten(0, 25, 10, 5), 5u);
  // Resumed at step 12: 20, 30 and every 4: 16, 24, 28.
  EXPECT_EQ(checkpointsWritten(12, 30, 10, 4), 5u);
  EXPECT_EQ(checkpointsWritten(30, 30, 10, 4), 0u);  // nothing left to train
  // --checkpoint-every beyond the run (and lcm(every, 7) beyond size_t).
  EXPECT_EQ(checkpointsWritten(0, 30, 7, std::size_t{1} << 62), 5u);  // 7, 14, 21, 28, the stop
}

TEST(DiskCheck, FilesHoldTheWeightsAndTheOptimizerStateOfTrainableParameters) {
  ddp::testing::TempDir dir;
  // 784-5-10: 3925 + 60 = 3985 parameters; layers.2 (60 of them) frozen.
  const Options o = parseArgs(
      {"--dataset", "synthetic", "--hidden", "5", "--checkpoint-dir", dir.path(), "--freeze", "2"});
  const OutputFiles files = outputFiles(o, 0, 30, 10);
  EXPECT_EQ(files.parameters, 3985u);
  EXPECT_EQ(files.modelBytes, 3985u * 4);
  EXPECT_EQ(files.checkpointBytes, (3985u + 3925u) * 4);
  EXPECT_EQ(files.checkpoints, 3u);
  EXPECT_EQ(files.newAtOnce, 3u);  // all kept
  // The count is the model's: what buildMlp makes of the same options.
  auto model = trainer::buildMlp(784, {5}, 10, 1);
  EXPECT_EQ(files.parameters, model->parameterCount());

  const Options still = parseArgs({"--dataset", "synthetic", "--hidden", "5", "--momentum", "0",
                                   "--checkpoint-dir", dir.path()});
  EXPECT_EQ(outputFiles(still, 0, 30, 10).checkpointBytes, 3985u * 4);
  const Options adamw = parseArgs({"--dataset", "synthetic", "--hidden", "5", "--optimizer",
                                   "adamw", "--checkpoint-dir", dir.path(), "--freeze", "2"});
  EXPECT_EQ(outputFiles(adamw, 0, 30, 10).checkpointBytes, (3985u + 2 * 3925u) * 4);  // 2 moments
}

TEST(DiskCheck, KeepCheckpointsBoundsThoseOnDiskCountingTheOnesThere) {
  ddp::testing::TempDir dir;
  const Options o = parseArgs({"--dataset", "synthetic", "--hidden", "5", "--checkpoint-dir",
                               dir.path(), "--keep-checkpoints", "2", "--checkpoint-every", "1"});
  EXPECT_EQ(outputFiles(o, 0, 30, 10).newAtOnce, 3u);  // 2 kept + 1 being written
  EXPECT_EQ(outputFiles(o, 0, 1, 10).newAtOnce, 1u);   // the run writes one
  std::ofstream(trainer::checkpointPath(dir.path(), 5)) << "x";
  EXPECT_EQ(outputFiles(o, 5, 30, 10).newAtOnce, 2u);  // one is there
  std::ofstream(trainer::checkpointPath(dir.path(), 6)) << "x";
  std::ofstream(trainer::checkpointPath(dir.path(), 7)) << "x";
  EXPECT_EQ(outputFiles(o, 7, 30, 10).newAtOnce, 1u);  // the older ones make room
}

OutputFiles defaultMlpFiles(std::size_t checkpoints, std::size_t newAtOnce) {
  OutputFiles files;
  files.parameters = 1863690;
  files.modelBytes = files.parameters * 4;
  files.checkpointBytes = 2 * files.modelBytes;  // 14.2 MiB
  files.checkpoints = checkpoints;
  files.newAtOnce = newAtOnce;
  return files;
}

TEST(DiskCheck, RefusesACheckpointThatCannotFitOnce) {
  const Options o = parseArgs({"--checkpoint-dir", "ck", "--max-steps", "10"});
  const DiskVerdict v = judgeDiskRoom(o, defaultMlpFiles(1, 1), DiskRoom{3 * kMiB, 1}, {});
  ASSERT_TRUE(v.refusal);
  EXPECT_EQ(
      *v.refusal,
      "--checkpoint-dir ck: a checkpoint takes 14.2 MiB (the weights and optimizer state of 1.86 M "
      "parameters), but its file system has 3.0 MiB free");
  EXPECT_FALSE(judgeDiskRoom(o, defaultMlpFiles(1, 1), DiskRoom{15 * kMiB, 1}, {}).refusal);
  // A run that writes no checkpoint (nothing left to train) needs no room.
  EXPECT_FALSE(judgeDiskRoom(o, defaultMlpFiles(0, 0), DiskRoom{0, 1}, {}).refusal);
}

TEST(DiskCheck, RefusesFinalWeightsThatCannotFitBesideTheNewestCheckpoint) {
  const Options o = parseArgs({"--checkpoint-dir", "ck", "--save-model", "m.safetensors"});
  const OutputFiles files = defaultMlpFiles(1, 1);
  // Apart: the weights alone (7.1 MiB) must fit.
  EXPECT_FALSE(judgeDiskRoom(o, files, DiskRoom{20 * kMiB, 1}, DiskRoom{8 * kMiB, 2}).refusal);
  const DiskVerdict apart = judgeDiskRoom(o, files, DiskRoom{20 * kMiB, 1}, DiskRoom{7 * kMiB, 2});
  ASSERT_TRUE(apart.refusal);
  EXPECT_EQ(*apart.refusal,
            "--save-model m.safetensors: the weights take 7.1 MiB but the file system has 7.0 "
            "MiB free");
  // Together: 14.2 + 7.1 MiB.
  const DiskVerdict shared =
      judgeDiskRoom(o, files, DiskRoom{20 * kMiB, 1}, DiskRoom{20 * kMiB, 1});
  ASSERT_TRUE(shared.refusal);
  EXPECT_EQ(*shared.refusal,
            "--save-model m.safetensors: the weights take 7.1 MiB, and a checkpoint of 14.2 MiB "
            "stays beside them, but the file system has 20.0 MiB free");
  EXPECT_FALSE(judgeDiskRoom(o, files, DiskRoom{22 * kMiB, 1}, DiskRoom{22 * kMiB, 1}).refusal);
}

TEST(DiskCheck, WarnsWhenTheCheckpointsFillTheDiskPartWay) {
  const Options all = parseArgs({"--checkpoint-dir", "ck", "--checkpoint-every", "4"});
  const DiskVerdict v = judgeDiskRoom(all, defaultMlpFiles(45, 45), DiskRoom{60 * kMiB, 1}, {});
  EXPECT_FALSE(v.refusal);
  ASSERT_TRUE(v.warning);
  EXPECT_EQ(*v.warning,
            "--checkpoint-dir ck: this run writes up to 45 checkpoints of 14.2 MiB and keeps them "
            "all, but its file system has 60.0 MiB free: after about 4 the disk is full and the "
            "run stops at the next one (--keep-checkpoints 2 keeps only the newest 2)");
  EXPECT_FALSE(judgeDiskRoom(all, defaultMlpFiles(45, 45), DiskRoom{640 * kMiB, 1}, {}).warning);

  const Options kept = parseArgs({"--checkpoint-dir", "ck", "--keep-checkpoints", "2"});
  const DiskVerdict k = judgeDiskRoom(kept, defaultMlpFiles(45, 3), DiskRoom{30 * kMiB, 1}, {});
  ASSERT_TRUE(k.warning);
  EXPECT_EQ(*k.warning,
            "--checkpoint-dir ck: --keep-checkpoints 2 needs room for 3 more checkpoints of 14.2 "
            "MiB at once (the one being written included), but its file system has 30.0 MiB "
            "free: the run stops at the first that does not fit");
  EXPECT_FALSE(judgeDiskRoom(kept, defaultMlpFiles(45, 3), DiskRoom{43 * kMiB, 1}, {}).warning);
}

TEST(DiskCheck, RoomOfARealDirectory) {
  ddp::testing::TempDir dir;
  const auto room = diskRoomAt(dir.path());
  ASSERT_TRUE(room);
  EXPECT_GT(room->freeBytes, 0u);
  EXPECT_EQ(diskRoomAt(dir.path())->device, room->device);
  EXPECT_FALSE(diskRoomAt(dir.file("missing")));
}

}  // namespace
}  // namespace ddp::launcher
