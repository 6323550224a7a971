// CheckpointWriter: checkpoints written on a thread of their own.
//
// Note [Checkpoints written in the background]
// Every rank waits while rank 0 writes a checkpoint (the ranks agree on its
// success before the next step), and writing is mostly the kernel copying
// into the page cache and the disk's fsync: 1 s for the large MLP's 281 MiB
// here, three steps' worth. Only taking the checkpoint's values has to
// happen between two steps; a writer thread does the rest (checksums,
// write, fsync, rename, --keep-checkpoints) while training continues. Where
// rank 0 keeps the values meanwhile (CheckpointStaging, --checkpoint-staging):
//   * kCopy: staging buffers of its own (kept from one checkpoint to the
//     next, so no page is faulted in twice; a device-to-host copy on the GPU
//     path): a memory copy between steps, the fastest, for one more host
//     copy of the checkpoint on rank 0 (1x its file);
//   * kDirect: the temporary file itself. Between steps rank 0 writes the
//     tensors into it, which puts them in the page cache (memory the kernel
//     writes back and may then reclaim, not the rank's own), and the thread
//     reads them back there for the checksums (Note [Writing a file in
//     parts] in trainer/safetensors.h), fsyncs and renames: no copy held
//     (a device tensor goes to the file through a 4 MiB host piece),
//     for a longer pause (the kernel's copy is slower than memcpy, and much
//     slower where page-cache pages are costly to get, as on this VM:
//     benchmarks/RESULTS.md, "Checkpoints without a copy").
// The launcher's auto (Note [Choosing where checkpoints are staged] in
// launcher/memory_check.h) copies when rank 0's node and process limit have
// room for the copy, and writes directly when not, where a run used to be
// refused at start-up.
// What both keep of a synchronous write:
//   * atomicity: the same temporary file and rename (a crash or kill -9
//     mid-write leaves the previous checkpoint);
//   * errors: a failed write is rethrown on rank 0 at the next checkpoint or
//     at finish() (kDirect's writes between steps: at once), inside agree(),
//     so every rank stops;
//   * order: one write at a time; a checkpoint due while the previous one is
//     still being written waits for it;
//   * the end: finish() waits for the last write, so a run that returns
//     (finished, --max-steps, a signal) has its checkpoint on disk.
// A sharded optimizer's state is never copied: kCopy gathers it into
// tensors that nothing changes afterwards, so the writer keeps those
// (OptimizerState::snapshot), writes them on its thread and lets go of them
// once written, and the next checkpoint gathers into the same memory
// (ShardedOptimizer::gatherState); kDirect streams it into the file
// between steps, piece by piece, as it arrives from the ranks (Note
// [Streaming a sharded optimizer's state] in trainer/sharded_optimizer.h).
// The gain of the thread needs a core for it: the write is CPU work
// (checksums, the kernel's copy), so with one core per rank it only moves
// it (measured in benchmarks/RESULTS.md, "Checkpoints in a run": 3.2x
// less per checkpoint with a free core, the same with none); the fsync's
// wait for the disk is off the critical path either way.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/checkpoint.h"

namespace ddp::trainer {

// Where rank 0 holds a checkpoint between the step it was taken after and
// its write (Note [Checkpoints written in the background]).
enum class CheckpointStaging {
  kCopy,    // staging buffers of its own: one host copy of the checkpoint
  kDirect,  // the file: written between steps into the page cache, no copy
};

// Whether CheckpointWriter::write, staging `staging`, streams `optimizer`'s
// state from every rank into the file instead of taking it gathered:
// written directly, a sharded optimizer's (Note [Streaming a sharded
// optimizer's state] in trainer/sharded_optimizer.h). Every rank asks, to
// know whether to gather before a checkpoint or to join the stream.
bool streamsState(CheckpointStaging staging, const Optimizer& optimizer);

class CheckpointWriter {
 public:
  // `onWritten` runs on the writer thread after each checkpoint is durable
  // (renamed into place, directory fsynced), with its path and position:
  // reporting it, deleting older ones. What it throws counts as a failed write.
  using WrittenHandler = std::function<void(const std::string& path, const TrainPosition& at)>;
  CheckpointWriter(WrittenHandler onWritten, CheckpointStaging staging);
  // Waits for a write in flight, then stops the thread. Never throws: a
  // failure nobody collected with finish() is logged.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The training thread, between steps: waits for the previous write
  // (rethrowing its DataError), creates the temporary file for `path`,
  // copies `model`'s parameters and `optimizer`'s state into the staging
  // buffers (kCopy) or writes them into the file (kDirect), and hands the
  // rest to the writer thread. Returns once they are copied: the model may
  // change right after. Throws DataError if the file cannot be created or
  // (kDirect) written.
  //
  // Where streamsState(): a collective, rank 0's part of
  // optimizer.streamState(0, ...), which writes the state into the file as
  // it arrives (Note [Streaming a sharded optimizer's state] in
  // trainer/sharded_optimizer.h); the other ranks call
  // optimizer.streamState(0, {}) meanwhile. Whatever fails before it, rank
  // 0 takes part to the end, and throws then.
  void write(const std::string& path, Sequential& model, Optimizer& optimizer,
             const TrainPosition& at, const CheckpointOptions& options);
  // Waits until nothing is being written; rethrows a failed write's error.
  void finish();
  // Waits until nothing is being written, and throws nothing: the next
  // write() or finish() reports a failure. Before a sharded optimizer
  // gathers the next checkpoint's state, so the last one's snapshot is gone.
  void awaitIdle();

 private:
  struct Job {
    std::unique_ptr<SafetensorsWriter> file;
    TrainPosition at;
  };
  void run();
  // write()'s part before the optimizer's state streams: creates the file
  // and stages every entry held here; for each entry streamed, records
  // which one it is under the optimizer's slot index in `entryOfSlot`.
  std::unique_ptr<SafetensorsWriter> stage(const std::string& path, Sequential& model,
                                           Optimizer& optimizer, const TrainPosition& at,
                                           const CheckpointOptions& options,
                                           std::vector<std::size_t>& entryOfSlot);
  // Waits for the writer to be idle. Caller holds `lock`; rethrows a stored error.
  void waitIdle(std::unique_lock<std::mutex>& lock);

  WrittenHandler onWritten_;
  const CheckpointStaging stagingMode_;
  struct Staged {
    // kCopy's copy (kept for the next checkpoint), or the optimizer's
    // snapshot; empty when kDirect's write() wrote or streamed it into the
    // file.
    Tensor tensor;
    // A snapshot the optimizer made for this checkpoint, kept instead of
    // copied and let go of once written (OptimizerState::snapshot).
    bool kept = false;
  };
  std::vector<Staged> staging_;  // writer thread while a job runs
  std::vector<float> piece_;     // kDirect: a device tensor's way to the file

  std::mutex mutex_;
  std::condition_variable changed_;
  bool busy_ = false;  // a job is queued or being written
  bool stopping_ = false;
  Job job_;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace ddp::trainer
