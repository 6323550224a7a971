// A Communicator that forwards every call to an MpiCommunicator over the
// world, for tests that change one thing about a real backend: derive, and
// override that one call.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi/mpi_communicator.h"

namespace ddp::comm {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(CommOptions options)
      : Communicator(options, "forwarding"), inner_(MPI_COMM_WORLD, options) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backendName() const override { return inner_.backendName(); }
  // The inner communicator's: its collectives are the ones issued.
  std::vector<const ActivityLog*> activityLogs() const override { return inner_.activityLogs(); }
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
