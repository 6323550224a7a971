// The checked-call macro for NCCL.
//
// A failing call throws CommError naming the call, file:line, the rank and
// NCCL's own message (ncclGetErrorString plus ncclGetLastError, which says
// which peer or transport failed).
#pragma once

#include <nccl.h>

namespace ddp::detail {

[[noreturn]] void throwNcclError(ncclResult_t code, ncclComm_t comm, const char* call,
                                 const char* file, int line);

}  // namespace ddp::detail

#define DDP_NCCL_CHECK(call, comm)                                                   \
  do {                                                                               \
    const ncclResult_t ddpNcclCode = (call);                                         \
    if (ddpNcclCode != ncclSuccess)                                                  \
      ::ddp::detail::throwNcclError(ddpNcclCode, (comm), #call, __FILE__, __LINE__); \
  } while (0)
