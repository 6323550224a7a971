#include "runtime/parallel_for.h"

#include <algorithm>
#include <utility>

namespace ddp {

ParallelFor::ParallelFor(unsigned threads) {
  const unsigned total = std::max(1u, threads);
  workers_.reserve(total - 1);
  try {
    for (unsigned part = 1; part < total; ++part)
      workers_.emplace_back([this, part] { work(part); });
  } catch (...) {  // no destructor runs: stop the threads already started
    stop();
    throw;
  }
}

ParallelFor::~ParallelFor() {
  stop();
}

void ParallelFor::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& worker : workers_)
    worker.join();
}

std::pair<std::size_t, std::size_t> ParallelFor::rangeOf(std::size_t part) const {
  const std::size_t base = count_ / parts_, extra = count_ % parts_;
  const std::size_t begin = part * base + std::min(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

void ParallelFor::work(std::size_t part) {
  std::size_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || job_ != seen; });
    if (stopping_) return;
    seen = job_;
    // A job of fewer parts leaves this thread out; one it slept through had
    // no part for it either, since run() waits for every part it hands out.
    if (part >= parts_) continue;
    const auto [begin, end] = rangeOf(part);
    const auto* body = body_;
    lock.unlock();
    std::exception_ptr caught;
    try {
      (*body)(begin, end);
    } catch (...) {
      caught = std::current_exception();
    }
    lock.lock();
    if (caught && !error_) error_ = caught;
    if (--pending_ == 0) done_.notify_one();
  }
}

void ParallelFor::run(std::size_t count, std::size_t grain,
                      const std::function<void(std::size_t, std::size_t)>& body) {
  if (count == 0) return;
  const std::size_t parts = std::min<std::size_t>(
      threads(), std::max<std::size_t>(1, count / std::max<std::size_t>(1, grain)));
  if (parts == 1) {
    body(0, count);
    return;
  }
  std::pair<std::size_t, std::size_t> mine;
  {
    std::lock_guard lock(mutex_);
    count_ = count;
    parts_ = parts;
    pending_ = parts - 1;
    body_ = &body;
    error_ = nullptr;
    ++job_;
    mine = rangeOf(0);
  }
  start_.notify_all();
  std::exception_ptr error;
  try {
    body(mine.first, mine.second);
  } catch (...) {
    error = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  body_ = nullptr;
  if (!error) error = std::exchange(error_, nullptr);
  error_ = nullptr;
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

}  // namespace ddp
