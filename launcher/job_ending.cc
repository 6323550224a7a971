#include "launcher/job_ending.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"
#include "runtime/str.h"

namespace ddp::launcher {

void JobEnding::end(const std::string& why, const std::function<void()>& report,
                    const std::function<void()>& leave) noexcept {
  if (claimed_.exchange(true)) {
    // Note [One thread ends the job]: the first caller's abort ends this.
    for (;;)
      std::this_thread::sleep_for(std::chrono::hours(1));
  }
  const auto guarded = [](const std::function<void()>& step) noexcept {
    try {
      if (step) step();
    } catch (const std::exception& e) {  // the job ends all the same
      log::error(str("while reporting why the job ends: ", e.what()));
    } catch (...) {
    }
  };
  guarded(leave);
  if (const std::optional<std::string> elsewhere = tellRankZero_(why)) {
    // Note [One rank ends the job] in comm/watchdog.h: the launcher ends this.
    log::info(str(why, "; ", *elsewhere));
    stops::Deadline deadline(endingTime_);  // a stopped process's time left out
    while (!deadline.passed())
      std::this_thread::sleep_until(deadline.nextLook());
    log::warn(str("the job did not end within ",
                  fixed(static_cast<double>(endingTime_.count()) / 1000.0, 1), " s (", *elsewhere,
                  "): this rank reports its own failure"));
  }
  guarded(report);
  abort_();
  std::_Exit(kExitFailure);  // abort_ does not return; this keeps [[noreturn]] honest
}

}  // namespace ddp::launcher
