// The communicator every MPI test uses: the world, a 60 s timeout.
#pragma once

#include <chrono>
#include <memory>

#include "comm/mpi/mpi_communicator.h"

namespace ddp::comm {

inline std::unique_ptr<MpiCommunicator> makeTestComm(
    std::chrono::milliseconds timeout = std::chrono::seconds(60), bool checkNonFinite = false) {
  CommOptions options;
  options.timeout = timeout;
  options.checkNonFinite = checkNonFinite;
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
}

}  // namespace ddp::comm
