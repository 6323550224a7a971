#include "launcher/disk_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "launcher/run_config.h"
#include "runtime/error.h"
#include "runtime/file_system.h"
#include "runtime/log.h"
#include "runtime/str.h"
#include "trainer/checkpoint.h"

namespace ddp::launcher {
namespace {

std::string directoryOf(const std::string& file) {
  const std::string parent = std::filesystem::path(file).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string plural(std::size_t n, const char* word) {
  return str(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

std::size_t checkpointsWritten(std::size_t firstStep, std::size_t lastStep,
                               std::size_t stepsPerEpoch, std::size_t every) {
  if (lastStep <= firstStep || stepsPerEpoch == 0) return 0;
  // Multiples of `n` in (firstStep, lastStep].
  const auto multiples = [&](std::size_t n) { return lastStep / n - firstStep / n; };
  std::size_t count = multiples(stepsPerEpoch);
  if (every > 0) {
    // At an epoch's last step the epoch's checkpoint stands in for the
    // every-N one: those are the multiples of lcm(every, stepsPerEpoch), none
    // when it lies beyond the run (computed without overflowing).
    const std::size_t factor = every / std::gcd(every, stepsPerEpoch);
    const std::size_t both =
        factor <= lastStep / stepsPerEpoch ? multiples(factor * stepsPerEpoch) : 0;
    count += multiples(every) - both;
  }
  const bool stopWritten = lastStep % stepsPerEpoch == 0 || (every > 0 && lastStep % every == 0);
  return count + (stopWritten ? 0 : 1);  // the stop, mid-epoch
}

OutputFiles outputFiles(const Options& o, std::size_t firstStep, std::size_t lastStep,
                        std::size_t stepsPerEpoch) {
  OutputFiles files;
  const ParameterCount count = countParameters(o);
  files.parameters = count.total;
  files.modelBytes = files.parameters * sizeof(float);
  if (o.checkpointDir.empty()) return files;
  files.checkpointBytes = files.modelBytes + optimizerStateBytes(o);
  files.checkpoints = checkpointsWritten(firstStep, lastStep, stepsPerEpoch, o.checkpointEvery);
  if (o.keepCheckpoints == 0) {
    files.newAtOnce = files.checkpoints;
  } else {
    // Writing one, then deleting all but the newest keepCheckpoints: the
    // directory peaks at keep + 1, of which `existing` are there already.
    const std::size_t existing = trainer::completeCheckpoints(o.checkpointDir).size();
    const std::size_t peak = o.keepCheckpoints + 1;
    files.newAtOnce =
        std::min(files.checkpoints, existing + 1 >= peak ? std::size_t{1} : peak - existing);
  }
  return files;
}

std::optional<DiskRoom> diskRoomAt(const std::string& directory) {
  struct stat info {};
  const std::optional<std::uint64_t> free = freeBytesAt(directory);
  if (!free || ::stat(directory.c_str(), &info) != 0) return std::nullopt;
  return DiskRoom{*free, static_cast<std::uint64_t>(info.st_dev)};
}

DiskVerdict judgeDiskRoom(const Options& o, const OutputFiles& files,
                          const std::optional<DiskRoom>& checkpointRoom,
                          const std::optional<DiskRoom>& modelRoom) {
  DiskVerdict verdict;
  const bool checkpoints = checkpointRoom && files.checkpoints > 0;
  const bool shared = checkpoints && modelRoom && modelRoom->device == checkpointRoom->device;
  if (checkpoints && checkpointRoom->freeBytes < files.checkpointBytes) {
    verdict.refusal = str("--checkpoint-dir ", o.checkpointDir, ": a checkpoint takes ",
                          bytesString(static_cast<double>(files.checkpointBytes)), " (the weights",
                          files.checkpointBytes > files.modelBytes ? " and optimizer state" : "",
                          " of ", fixed(static_cast<double>(files.parameters) / 1e6, 2),
                          " M parameters), but its file system has ",
                          bytesString(static_cast<double>(checkpointRoom->freeBytes)), " free");
    return verdict;
  }
  // With the checkpoints beside it, the final weights need room next to the
  // newest one, which stays.
  const std::uint64_t modelNeed = files.modelBytes + (shared ? files.checkpointBytes : 0);
  if (modelRoom && modelRoom->freeBytes < modelNeed) {
    verdict.refusal = str(
        "--save-model ", o.saveModel, ": the weights take ",
        bytesString(static_cast<double>(files.modelBytes)),
        shared ? str(", and a checkpoint of ",
                     bytesString(static_cast<double>(files.checkpointBytes)), " stays beside them,")
               : std::string(),
        " but the file system has ", bytesString(static_cast<double>(modelRoom->freeBytes)),
        " free");
    return verdict;
  }
  if (!checkpoints) return verdict;
  const std::uint64_t need =
      files.newAtOnce * files.checkpointBytes + (shared ? files.modelBytes : 0);
  if (checkpointRoom->freeBytes >= need) return verdict;
  const std::size_t fit = checkpointRoom->freeBytes / files.checkpointBytes;
  const std::string each = bytesString(static_cast<double>(files.checkpointBytes));
  const std::string room =
      str("its file system has ", bytesString(static_cast<double>(checkpointRoom->freeBytes)),
          " free", shared ? " (and --save-model goes there too)" : "");
  if (o.keepCheckpoints == 0) {
    verdict.warning = str("--checkpoint-dir ", o.checkpointDir, ": this run writes up to ",
                          plural(files.checkpoints, "checkpoint"), " of ", each,
                          " and keeps them all, but ", room, ": after about ", fit,
                          " the disk is full and the run stops at the next one "
                          "(--keep-checkpoints 2 keeps only the newest 2)");
  } else {
    verdict.warning =
        str("--checkpoint-dir ", o.checkpointDir, ": --keep-checkpoints ", o.keepCheckpoints,
            " needs room for ", plural(files.newAtOnce, "more checkpoint"), " of ", each,
            " at once (the one being written included), but ", room,
            ": the run stops at the first that does not fit");
  }
  return verdict;
}

void checkDiskRoom(const Options& o, const OutputFiles& files) {
  const std::optional<DiskRoom> checkpointRoom =
      o.checkpointDir.empty() ? std::nullopt : diskRoomAt(o.checkpointDir);
  const std::optional<DiskRoom> modelRoom =
      o.saveModel.empty() ? std::nullopt : diskRoomAt(directoryOf(o.saveModel));
  const DiskVerdict verdict = judgeDiskRoom(o, files, checkpointRoom, modelRoom);
  if (verdict.refusal) throw DataError(*verdict.refusal);
  // --save-best writes a new file beside the one it replaces.
  const std::optional<DiskRoom> bestRoom =
      o.saveBest.empty() ? std::nullopt : diskRoomAt(directoryOf(o.saveBest));
  if (bestRoom && bestRoom->freeBytes < files.modelBytes) {
    throw DataError(str("--save-best ", o.saveBest, ": the weights take ",
                        bytesString(static_cast<double>(files.modelBytes)),
                        " but the file system has ",
                        bytesString(static_cast<double>(bestRoom->freeBytes)), " free"));
  }
  if (verdict.warning) log::warn(*verdict.warning);
}

}  // namespace ddp::launcher
