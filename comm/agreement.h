// Agreement: turn one rank's error into a clean stop on every rank.
//
// A rank that fails on its own (a bad file, a bad option value) must not leave
// the others blocked in the next collective. Code that can fail on some ranks
// runs inside agree(): the ranks all-reduce a failure flag, and if any rank
// failed, every rank throws — the failing ranks their own error, the others a
// PeerFailedError naming the ranks that failed. Then every rank can exit
// cleanly through MPI_Finalize, without MPI_Abort's noise.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "runtime/error.h"

namespace ddp::comm {

class PeerFailedError : public Error {
 public:
  PeerFailedError(std::string message, std::vector<int> ranks)
      : Error(std::move(message)), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  std::vector<int> ranks_;
};

// Runs `body` on this rank, then agrees with every rank on whether all of
// them succeeded. Collective: every rank must call it at the same point.
// ddp::Error and std::exception from body are caught and agreed on.
void agree(Communicator& comm, const std::function<void()>& body);

// Gives every rank `root`'s `bytes` (a file only `root` can read: nodes need
// not share a file system). Collective; host memory; two broadcasts.
void shareFrom(Communicator& comm, int root, std::string& bytes);

}  // namespace ddp::comm
