#include "runtime/mpi_check.h"

#include "runtime/error.h"
#include "runtime/log.h"

namespace ddp::detail {

void throwMpiError(int code, const char* call, const char* file, int line) {
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, message, &length) != MPI_SUCCESS) {
    std::snprintf(message, sizeof message, "MPI error code %d", code);
  }
  throw CommError(
      str(call, " failed on rank ", log::processRank(), " at ", file, ":", line, ": ", message));
}

}  // namespace ddp::detail
