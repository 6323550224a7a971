#include "runtime/error.h"

#include "runtime/log.h"

namespace ddp {

void throwInternal(const char* condition, const std::string& message, const char* file, int line) {
  throw InternalError(str("internal error on rank ", log::processRank(), ": ", message, " (",
                          condition, " failed at ", file, ":", line, ")"));
}

}  // namespace ddp
