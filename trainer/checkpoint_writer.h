// CheckpointWriter: checkpoints written on a thread of their own.
//
// Note [Checkpoints written in the background]
// Every rank waits while rank 0 writes a checkpoint (the ranks agree on its
// success before the next step), and writing is mostly the kernel copying
// into the page cache and the disk's fsync: 1 s for the large MLP's 281 MiB
// here, three steps' worth. Only the snapshot has to happen between two
// steps. So rank 0 copies the parameters and optimizer state into staging
// buffers of its own (kept from one checkpoint to the next, so no page is
// faulted in twice; a device-to-host copy on the GPU path) and a writer
// thread does the rest: checksums, write, fsync, rename, --keep-checkpoints.
// Training continues meanwhile. What this keeps of the synchronous write:
//   * atomicity: the same temporary file and rename (a crash or kill -9
//     mid-write leaves the previous checkpoint);
//   * errors: a failed write is rethrown on rank 0 at the next checkpoint or
//     at finish(), inside agree(), so every rank stops, as before, only later;
//   * order: one write at a time; a checkpoint due while the previous one is
//     still being written waits for it;
//   * the end: finish() waits for the last write, so a run that returns
//     (finished, --max-steps, a signal) has its checkpoint on disk.
// The cost: one more host copy of the checkpoint's tensors on rank 0; not
// of a sharded optimizer's state, which is gathered into new tensors for
// each checkpoint that nothing changes afterwards: the writer keeps those
// (OptimizerState::snapshot) and lets go of them once written. The gain
// needs a core for the thread: the write is CPU work (checksums, the
// kernel's copy), so with one core per rank it only moves it (measured in
// benchmarks/RESULTS.md, "Checkpoints in a run": 3.2x less per checkpoint
// with a free core, the same with none).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/checkpoint.h"

namespace ddp::trainer {

class CheckpointWriter {
 public:
  // `onWritten` runs on the writer thread after each checkpoint is durable
  // (renamed into place, directory fsynced), with its path and position:
  // reporting it, deleting older ones. What it throws counts as a failed write.
  using WrittenHandler = std::function<void(const std::string& path, const TrainPosition& at)>;
  explicit CheckpointWriter(WrittenHandler onWritten);
  // Waits for a write in flight, then stops the thread. Never throws: a
  // failure nobody collected with finish() is logged.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The training thread, between steps: waits for the previous write
  // (rethrowing its DataError), copies `model`'s parameters and
  // `optimizer`'s state into the staging buffers, and hands them
  // to the writer thread for `path`. Returns once the copy is done: the
  // model may change right after.
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
    std::string path;
    TrainPosition at;
    std::map<std::string, std::string> metadata;
  };
  void run();
  // Waits for the writer to be idle. Caller holds `lock`; rethrows a stored error.
  void waitIdle(std::unique_lock<std::mutex>& lock);

  WrittenHandler onWritten_;
  struct Staged {
    std::string name;
    Tensor tensor;
    // A snapshot the optimizer made for this checkpoint, kept instead of
    // copied and let go of once written (OptimizerState::snapshot).
    bool kept = false;
  };
  std::vector<Staged> staging_;  // writer thread while a job runs

  std::mutex mutex_;
  std::condition_variable changed_;
  bool busy_ = false;  // a job is queued or being written
  bool stopping_ = false;
  Job job_;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace ddp::trainer
