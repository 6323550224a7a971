#include "launcher/job_ending.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"

namespace ddp::launcher {

void JobEnding::end(const std::string& why, const std::function<void()>& report) noexcept {
  if (claimed_.exchange(true)) {
    // Note [One thread ends the job]: the first caller's abort ends this.
    for (;;)
      std::this_thread::sleep_for(std::chrono::hours(1));
  }
  try {
    report();
  } catch (const std::exception& e) {  // the job ends all the same
    log::error(str("while reporting why the job ends: ", e.what()));
  } catch (...) {
  }
  tellRankZero_(why);
  abort_();
  std::_Exit(kExitFailure);  // abort_ does not return; this keeps [[noreturn]] honest
}

}  // namespace ddp::launcher
