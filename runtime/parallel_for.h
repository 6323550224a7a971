// Threads started once that split a range of work with the calling thread.
//
// Note [Threads kept for the batch gather]
// On GPUs the host gathers each step's batch (trainer/cuda/device_batches.h),
// on several threads when the batch is large, while the GPU computes the
// previous one. Starting those threads on every step puts their creation
// and join on the training thread, one after another: with 16 threads that
// is a few hundred microseconds a step, as long as the gather itself and
// about as long as a small model's whole step on an H200. These threads
// are started once and sleep between calls; run() hands each a part, runs
// the first part itself, and returns when every part is done
// (benchmarks/gather_bench, RESULTS.md "Gathering a batch on kept threads").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ddp {

class ParallelFor {
 public:
  // `threads`: how many threads run() uses, the caller's included (at least
  // 1; 1 starts none). Throws std::system_error if a thread cannot start.
  explicit ParallelFor(unsigned threads);
  // Stops and joins the threads. Never throws. Not while run() runs.
  ~ParallelFor();
  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls body(begin, end) on contiguous, disjoint parts that together cover
  // [0, count): at most threads() parts of nearly equal size, none smaller
  // than `grain` items unless count is (grain 0 counts as 1). The calling
  // thread runs the first part. Returns when every part has returned; if any
  // threw, then rethrows one of their exceptions (the caller's own first).
  // One caller at a time; `body` must be safe to call from several threads
  // at once on disjoint parts.
  void run(std::size_t count, std::size_t grain,
           const std::function<void(std::size_t begin, std::size_t end)>& body);

 private:
  void work(std::size_t part);
  // Wakes the workers to return and joins them.
  void stop() noexcept;
  // Part `part`'s range of the current job; under mutex_, or by run()'s caller.
  std::pair<std::size_t, std::size_t> rangeOf(std::size_t part) const;

  std::mutex mutex_;               // guards everything below but workers_
  std::condition_variable start_;  // a new job, or stopping
  std::condition_variable done_;   // the last worker's part of a job returned
  std::size_t job_ = 0;            // counts run() calls: workers wait for a new one
  std::size_t count_ = 0;          // the job's items
  std::size_t parts_ = 0;          // the job's parts (the caller's included)
  std::size_t pending_ = 0;        // workers' parts not yet returned
  const std::function<void(std::size_t, std::size_t)>* body_ = nullptr;
  std::exception_ptr error_;  // a worker's part threw this
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // worker i runs part i + 1
};

}  // namespace ddp
