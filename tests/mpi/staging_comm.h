// A Communicator that forwards every call to an MpiCommunicator but answers
// "no" to reducesViaBFloat16InPlace(), as the NCCL backend does: the Reducer
// then takes its own staged bf16 path (narrow into a staging buffer, a
// kBFloat16 collective, widen), which only GPUs use otherwise, and the CPU
// tests can check it against the MPI backend's rounding (Notes [bf16
// rounding inside the reduction] and [bf16 rounding between nodes]).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "comm/mpi/mpi_communicator.h"

namespace ddp::comm {

class StagingCommunicator final : public Communicator {
 public:
  explicit StagingCommunicator(CommOptions options)
      : Communicator(options, "staging"), inner_(MPI_COMM_WORLD, options) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backendName() const override { return "mpi (staging bfloat16)"; }
  WorkPtr allreduce(const void* send, void* recv, std::size_t count, DataType type,
                    ReduceOp op) override {
    return inner_.allreduce(send, recv, count, type, op);
  }
  WorkPtr reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type,
                        ReduceOp op) override {
    return inner_.reduceScatter(data, bounds, type, op);
  }
  WorkPtr broadcast(void* data, std::size_t count, DataType type, int root) override {
    return inner_.broadcast(data, count, type, root);
  }
  WorkPtr allgather(const void* send, void* recv, std::size_t count, DataType type) override {
    return inner_.allgather(send, recv, count, type);
  }
  WorkPtr gather(const void* send, void* recv, std::size_t count, DataType type,
                 int root) override {
    return inner_.gather(send, recv, count, type, root);
  }
  WorkPtr barrier() override { return inner_.barrier(); }
  std::shared_ptr<void> allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  Memory allocatedMemory() const override { return inner_.allocatedMemory(); }

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;

 private:
  MpiCommunicator inner_;
};

}  // namespace ddp::comm
