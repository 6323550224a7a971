#include "runtime/error.h"

#include <new>
#include <system_error>

#include "runtime/log.h"

namespace ddp {

void throwInternal(const char* condition, const std::string& message, const char* file, int line) {
  throw InternalError(str("internal error on rank ", log::processRank(), ": ", message, " (",
                          condition, " failed at ", file, ":", line, ")"));
}

std::string describeFailure(const std::exception& e) {
  if (const auto* system = dynamic_cast<const std::system_error*>(&e);
      system != nullptr && system->code() == std::errc::resource_unavailable_try_again) {
    return str(e.what(),
               ": this process could not start a thread (no room for its stack, or no thread "
               "left): a limit on the process (ulimit -v, ulimit -u) or its cgroup (pids.max) "
               "is too tight for MPI, ddp's threads and the model; raise it");
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return str("out of memory (", e.what(),
               "): this rank could not allocate what it needed; a smaller model or batch, fewer "
               "ranks per node, or a higher memory limit");
  }
  return e.what();
}

}  // namespace ddp
