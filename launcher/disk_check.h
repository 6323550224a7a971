// Start-up check that the files a run writes fit on their file systems.
//
// Note [Refusing files the disk cannot hold]
// A checkpoint that does not fit fails the run when it is written: the first
// one after minutes, a later one after hours, and every step since the one
// before is trained again. Rank 0, which writes every checkpoint and
// --save-model, knows at start-up how large each file is (the tensors; the
// header adds a few KiB) and how many checkpoints the run writes, so it
// compares them with the room on each file system:
//   * not even one checkpoint (or, with the checkpoints on the same file
//     system, not the final weights next to them) fits: refused before the
//     first step, as a bad path is;
//   * the run's checkpoints fill the disk part-way: a warning that says after
//     how many, and that --keep-checkpoints bounds them. Not a refusal: the
//     run trains until then and stops at the failed write with every earlier
//     checkpoint intact, and the room can change while a job runs.
// For the same reason a write that fails on a full disk names the file's size
// and the room there was (trainer/safetensors.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "launcher/options.h"

namespace ddp::launcher {

// What rank 0 will write (Note [Refusing files the disk cannot hold]).
struct OutputFiles {
  std::uint64_t checkpointBytes = 0;  // one checkpoint: weights and optimizer state
  std::uint64_t modelBytes = 0;       // --save-model: the weights
  std::size_t parameters = 0;         // for the messages
  std::size_t checkpoints = 0;        // written by this run, at most
  // More checkpoints than the directory holds now at the fullest, the one
  // being written included: all of them without --keep-checkpoints.
  std::size_t newAtOnce = 0;
};

// The checkpoints written over global steps (firstStep, lastStep]: every
// `every` steps (0: never), at each epoch's end (`stepsPerEpoch`) and at the
// stop when neither wrote one there. A run resumed on another world size has
// a shorter first epoch, and a signal adds one at the stop: the count is
// then off by those. It restates Trainer::run's cadence: change both together.
std::size_t checkpointsWritten(std::size_t firstStep, std::size_t lastStep,
                               std::size_t stepsPerEpoch, std::size_t every);

// The files of `o` over global steps (firstStep, lastStep]; reads how many
// checkpoints --checkpoint-dir holds already.
OutputFiles outputFiles(const Options& o, std::size_t firstStep, std::size_t lastStep,
                        std::size_t stepsPerEpoch);

// The room a writer has on a file system, and which one it is.
struct DiskRoom {
  std::uint64_t freeBytes = 0;
  std::uint64_t device = 0;  // st_dev: equal for the same file system
};

// The room on the file system holding `directory` (statvfs: the blocks
// available to this user; root may also use the reserved ones), or nullopt
// when it cannot be read (the check is then skipped).
std::optional<DiskRoom> diskRoomAt(const std::string& directory);

struct DiskVerdict {
  std::optional<std::string> refusal;  // the run cannot write its files
  std::optional<std::string> warning;  // its checkpoints fill the disk part-way
};

// The verdict for `files` given the room where the checkpoints go and where
// --save-model goes (nullopt: that file is not written, or its room is
// unknown).
DiskVerdict judgeDiskRoom(const Options& o, const OutputFiles& files,
                          const std::optional<DiskRoom>& checkpointRoom,
                          const std::optional<DiskRoom>& modelRoom);

// Rank 0, after checkOutputPaths (the directories exist): throws DataError
// with the refusal, logs the warning. Call inside agree().
void checkDiskRoom(const Options& o, const OutputFiles& files);

}  // namespace ddp::launcher
