// The one checked-call macro for MPI.
//
// Only files that may include <mpi.h> (runtime/world, comm/mpi) include this.
// World sets MPI_ERRORS_RETURN on every communicator it hands out, so a failing
// call returns here instead of aborting inside the library; the macro turns
// the code into a CommError that names the call, file:line, rank and MPI's
// own message.
#pragma once

#include <mpi.h>

#include <string>

namespace ddp::detail {

[[noreturn]] void throwMpiError(int code, const char* call, const char* file, int line);

}  // namespace ddp::detail

#define DDP_MPI_CHECK(call)                                                \
  do {                                                                     \
    const int ddpMpiCode = (call);                                         \
    if (ddpMpiCode != MPI_SUCCESS)                                         \
      ::ddp::detail::throwMpiError(ddpMpiCode, #call, __FILE__, __LINE__); \
  } while (0)
