#include "launcher/run_end_recorder.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <thread>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"
#include "runtime/str.h"

namespace ddp::launcher {

void RunEndRecorder::setWriter(Writer write, std::function<std::size_t()> reportedStep) {
  const std::lock_guard lock(mutex_);
  write_ = std::move(write);
  reportedStep_ = std::move(reportedStep);
}

void RunEndRecorder::update(const Change& change) {
  const std::lock_guard lock(mutex_);
  change(outcome_);
}

bool RunEndRecorder::end(const Change& last) {
  RunOutcome outcome;
  Writer write;
  {
    const std::lock_guard lock(mutex_);
    if (claimed_ || !write_) return false;
    claimed_ = true;
    last(outcome_);
    const Clock::time_point now = Clock::now();
    outcome_.wallSeconds = std::chrono::duration<double>(now - startedAt_).count();
    outcome_.suspendedSeconds =
        std::chrono::duration<double>(stops::stoppedBetween(startedAt_, now)).count();
    outcome = outcome_;
    write = write_;
  }
  write(outcome);
  return true;
}

bool RunEndRecorder::endWithError(const std::string& error, int exitCode) {
  return end([&](RunOutcome& o) {  // under mutex_, as reportedStep_ must be read
    o.endedBy = "error";
    o.exitCode = exitCode;
    o.error = error;
    if (reportedStep_) o.globalStep = std::max(o.globalStep, reportedStep_());
  });
}

bool RunEndRecorder::endWithErrorWithin(const std::string& error,
                                        std::chrono::milliseconds patience) {
  // Shared with the writing thread, which may outlive this call.
  struct Done {
    std::mutex mutex;
    std::condition_variable changed;
    bool finished = false;
    bool wrote = false;
  };
  const auto done = std::make_shared<Done>();
  try {
    std::thread([this, done, error] {
      bool wrote = false;
      try {
        wrote = endWithError(error);
      } catch (const std::exception& e) {
        log::warn(str("--metrics: the run's end line was not written: ", e.what()));
      }
      const std::lock_guard lock(done->mutex);
      done->finished = true;
      done->wrote = wrote;
      done->changed.notify_all();
    }).detach();
  } catch (const std::exception& e) {  // no thread to be had
    log::warn(str("--metrics: the run's end line was not written: ", e.what()));
    return false;
  }
  std::unique_lock lock(done->mutex);
  if (!done->changed.wait_for(lock, patience, [&] { return done->finished; })) {
    log::warn(str("--metrics: the run's end line was not written within ",
                  fixed(static_cast<double>(patience.count()) / 1000.0, 1),
                  " s (is its file system hanging?); the job ends without it"));
    return false;
  }
  return done->wrote;
}

}  // namespace ddp::launcher
