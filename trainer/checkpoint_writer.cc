#include "trainer/checkpoint_writer.h"

#include <algorithm>
#include <set>
#include <utility>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"

namespace ddp::trainer {

CheckpointWriter::CheckpointWriter(WrittenHandler onWritten, CheckpointStaging staging)
    : onWritten_(std::move(onWritten)), stagingMode_(staging), thread_([this] { run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !busy_; });
    stopping_ = true;
    if (error_) {
      try {
        std::rethrow_exception(error_);
      } catch (const std::exception& e) {
        log::error(str("checkpoint: ", e.what()));
      }
    }
  }
  changed_.notify_all();
  thread_.join();
}

void CheckpointWriter::waitIdle(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [this] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CheckpointWriter::awaitIdle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
}

void CheckpointWriter::finish() {
  std::unique_lock lock(mutex_);
  waitIdle(lock);
}

namespace {

// What kDirect copies of a device tensor to the host at a time.
constexpr std::size_t kDevicePieceFloats = (std::size_t{4} << 20) / sizeof(float);

}  // namespace

bool streamsState(CheckpointStaging staging, const Optimizer& optimizer) {
  return staging == CheckpointStaging::kDirect && optimizer.sharded();
}

void CheckpointWriter::write(const std::string& path, Sequential& model, Optimizer& optimizer,
                             const TrainPosition& at, const CheckpointOptions& options) {
  // Note [Streaming a sharded optimizer's state]: the other ranks are in the
  // stream's collective, so it is reached whatever fails before it.
  const bool streams = streamsState(stagingMode_, optimizer);
  std::unique_lock lock(mutex_);
  std::unique_ptr<SafetensorsWriter> file;
  std::vector<std::size_t> entryOfSlot;  // streamed state: its entry in the file
  std::exception_ptr failed;
  try {
    waitIdle(lock);  // the writer thread no longer touches staging_
    file = stage(path, model, optimizer, at, options, entryOfSlot);
  } catch (...) {
    if (!streams) throw;
    failed = std::current_exception();
  }
  if (streams) {
    try {
      optimizer.streamState(0, [&](std::size_t slot, std::size_t begin,
                                   std::span<const float> values) {
        if (failed) return;
        DDP_CHECK(slot < entryOfSlot.size() && entryOfSlot[slot] < file->size(),
                  str("optimizer state slot ", slot, " streamed into no entry of the checkpoint"));
        file->writePart(entryOfSlot[slot], begin, values);
      });
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  job_ = Job{std::move(file), at};
  busy_ = true;
  lock.unlock();
  changed_.notify_all();
}

std::unique_ptr<SafetensorsWriter> CheckpointWriter::stage(const std::string& path,
                                                           Sequential& model, Optimizer& optimizer,
                                                           const TrainPosition& at,
                                                           const CheckpointOptions& options,
                                                           std::vector<std::size_t>& entryOfSlot) {
  const std::vector<CheckpointEntry> entries = checkpointEntries(model, optimizer);
  std::set<const Tensor*> snapshots;
  for (const OptimizerState& slot : optimizer.state()) {
    if (slot.snapshot) snapshots.insert(slot.tensor);
  }
  std::vector<SafetensorsWriter::Entry> layout;
  for (const CheckpointEntry& entry : entries)
    layout.push_back({entry.name, entry.shape});
  auto file =
      std::make_unique<SafetensorsWriter>(path, std::move(layout), checkpointMetadata(at, options));
  staging_.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Staged& staged = staging_[i];
    const Tensor& source = *entries[i].tensor;
    staged.kept = !source.empty() && snapshots.contains(&source) && !source.onCuda();
    if (source.empty()) {  // state on the shards, not gathered: streamed into the file
      DDP_CHECK(
          streamsState(stagingMode_, optimizer),
          str("a checkpoint of ", entries[i].name, " that was neither gathered nor streamed"));
      const std::size_t slot = *entries[i].slot;
      if (entryOfSlot.size() <= slot) entryOfSlot.resize(slot + 1, entries.size());
      entryOfSlot[slot] = i;
      continue;
    }
    if (staged.kept) continue;  // below, once nothing here can fail
    if (stagingMode_ == CheckpointStaging::kDirect) {
      // Into the file's page cache, checksummed by the writer thread from
      // there (Note [Writing a file in parts] in trainer/safetensors.h).
      if (!source.onCuda()) {
        file->write(i, source.span(), SafetensorsWriter::Checksum::kAtCommit);
        continue;
      }
      // A device tensor goes through one host piece, not a host copy of
      // itself: rank 0 holds no more than that beside the run.
      piece_.resize(std::min(kDevicePieceFloats, source.numel()));
      for (std::size_t start = 0; start < source.numel(); start += piece_.size()) {
        const std::span<float> part(piece_.data(), std::min(piece_.size(), source.numel() - start));
        source.copyToHost(start, part);
        file->writePart(i, start, part);
      }
      continue;
    }
    staged.tensor.resize(source.shape(), Device::kCpu);  // kept when the shape is
    staged.tensor.copyFrom(source);
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (staging_[i].kept) staging_[i].tensor = *entries[i].tensor;  // shares its memory
  }
  return file;
}

void CheckpointWriter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return busy_ || stopping_; });
    if (!busy_) return;  // stopping, nothing left to write
    Job job = std::move(job_);
    lock.unlock();
    std::exception_ptr error;
    try {
      // What write() left to this thread: kCopy's copies and the snapshots.
      for (std::size_t i = 0; i < staging_.size(); ++i) {
        if (stagingMode_ == CheckpointStaging::kCopy || staging_[i].kept)
          job.file->write(i, staging_[i].tensor.span(), SafetensorsWriter::Checksum::kNow);
      }
      job.file->commit();
      onWritten_(job.file->path(), job.at);
    } catch (...) {
      error = std::current_exception();
    }
    job.file.reset();  // an uncommitted file's temporary goes
    for (Staged& staged : staging_) {
      if (staged.kept) staged.tensor = Tensor();  // the snapshot's memory goes now
    }
    lock.lock();
    error_ = error;
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace ddp::trainer
