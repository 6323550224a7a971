// A Communicator that forwards every call to an MpiCommunicator but answers
// "no" to reducesViaBFloat16InPlace(), as the NCCL backend does: the Reducer
// then takes its own staged bf16 path (narrow into a staging buffer, a
// kBFloat16 collective, widen), which only GPUs use otherwise, and the CPU
// tests can check it against the MPI backend's rounding (Notes [bf16
// rounding inside the reduction] and [bf16 rounding between nodes]).
#pragma once

#include <string>

#include "forwarding_comm.h"

namespace ddp::comm {

class StagingCommunicator final : public ForwardingCommunicator {
 public:
  explicit StagingCommunicator(CommOptions options) : ForwardingCommunicator(options) {}

  std::string backendName() const override { return "mpi (staging bfloat16)"; }
  bool reducesViaBFloat16InPlace() const override { return false; }
};

}  // namespace ddp::comm
