// One run per checkpoint directory (Note [One run per checkpoint
// directory]): a second lock on the directory is refused, naming the holder;
// the lock ends with its holder.
#include "launcher/checkpoint_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>

#include "runtime/error.h"
#include "runtime/world.h"
#include "test_files.h"

namespace ddp::launcher {
namespace {

std::string refusalOf(const std::string& dir) {
  try {
    CheckpointDirLock second(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  return "locked";
}

TEST(CheckpointDirLock, ASecondRunIsRefusedWithTheHolderNamed) {
  ddp::testing::TempDir dir;
  std::optional<CheckpointDirLock> first(std::in_place, dir.path());
  // flock() locks an open file, so a second open in this process conflicts
  // exactly as another process would.
  const std::string refusal = refusalOf(dir.path());
  EXPECT_EQ(refusal.rfind(
                str("--checkpoint-dir ", dir.path(), " is in use by another run: ddp_train (pid ",
                    ::getpid(), " on ", thisHostname()),
                0),
            0u)
      << refusal;
  EXPECT_NE(refusal.find("give each run its own directory"), std::string::npos) << refusal;
  first.reset();  // the holder ends: the directory is free again
  EXPECT_EQ(refusalOf(dir.path()), "locked");
}

TEST(CheckpointDirLock, AMissingDirectoryIsNamed) {
  ddp::testing::TempDir dir;
  const std::string refusal = refusalOf(dir.file("missing"));
  EXPECT_EQ(refusal.rfind(CheckpointDirLock::pathIn(dir.file("missing")) + ": cannot open", 0), 0u)
      << refusal;
}

}  // namespace
}  // namespace ddp::launcher
