#include "trainer/checkpoint_writer.h"

#include <set>
#include <utility>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"

namespace ddp::trainer {

CheckpointWriter::CheckpointWriter(WrittenHandler onWritten)
    : onWritten_(std::move(onWritten)), thread_([this] { run(); }) {}

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

void CheckpointWriter::write(const std::string& path, Sequential& model, Optimizer& optimizer,
                             const TrainPosition& at, const CheckpointOptions& options) {
  std::unique_lock lock(mutex_);
  waitIdle(lock);  // the writer thread no longer touches staging_
  const auto live = checkpointTensors(model, optimizer);
  std::set<const Tensor*> snapshots;
  for (const OptimizerState& slot : optimizer.state()) {
    if (slot.snapshot) snapshots.insert(slot.tensor);
  }
  staging_.resize(live.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    Staged& staged = staging_[i];
    staged.name = live[i].first;
    staged.kept = snapshots.contains(live[i].second) && !live[i].second->onCuda();
    if (staged.kept) {
      staged.tensor = *live[i].second;  // shares its memory
      continue;
    }
    staged.tensor.resize(live[i].second->shape(), Device::kCpu);  // kept when the shape is
    staged.tensor.copyFrom(*live[i].second);
  }
  job_ = Job{path, at, checkpointMetadata(at, options)};
  busy_ = true;
  lock.unlock();
  changed_.notify_all();
}

void CheckpointWriter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return busy_ || stopping_; });
    if (!busy_) return;  // stopping, nothing left to write
    const Job job = job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      std::vector<std::pair<std::string, const Tensor*>> tensors;
      for (const Staged& staged : staging_)
        tensors.emplace_back(staged.name, &staged.tensor);
      saveSafetensors(job.path, tensors, job.metadata);
      onWritten_(job.path, job.at);
    } catch (...) {
      error = std::current_exception();
    }
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
