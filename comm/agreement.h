// Agreement: turn one rank's error into a clean stop on every rank.
//
// A rank that fails on its own (a bad file, a bad option value) must not leave
// the others blocked in the next collective. Code that can fail on some ranks
// runs inside agree(): the ranks all-reduce a failure flag, and if any rank
// failed, every rank throws — the failing ranks their own error, the others a
// PeerFailedError naming the ranks that failed. Then every rank can exit
// cleanly through MPI_Finalize, without MPI_Abort's noise.
//
// Note [What a peer's failure says]
// "Rank 3 failed (see its message)" sends the user to rank 3's log, which a
// job's output may not even hold (without --log-all-ranks, or a batch
// system keeping one file per task), and leaves rank 0's record, the run's
// end line in --metrics (launcher/run_end.h), without the cause. So once
// the flags show a failure, each of the first few failed ranks broadcasts
// its message (two broadcasts each: paid on the failure path only, and
// capped, so that a thousand ranks failing alike cost four), and the
// PeerFailedError says it: "stopping: rank 3 failed: data: ... truncated".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "runtime/error.h"

namespace ddp::comm {

class PeerFailedError : public Error {
 public:
  PeerFailedError(const std::string& message, std::vector<int> ranks, bool usage)
      : Error(message), ranks_(std::move(ranks)), usage_(usage) {}
  const std::vector<int>& ranks() const { return ranks_; }
  // Every failed rank failed on a UsageError (an option value that only the
  // data or the world size shows to be bad): the job exits as for any other
  // usage error, with kExitUsage, on every rank alike.
  bool usage() const { return usage_; }

 private:
  std::vector<int> ranks_;
  bool usage_;
};

// Runs `body` on this rank, then agrees with every rank on whether all of
// them succeeded. Collective: every rank must call it at the same point.
// ddp::Error and std::exception from body are caught and agreed on: a
// failed rank rethrows its own, the others throw PeerFailedError with the
// failed ranks' messages (Note [What a peer's failure says]) and whether
// they all failed on a UsageError.
void agree(Communicator& comm, const std::function<void()>& body);

// What a PeerFailedError says (Note [What a peer's failure says]): "stopping:
// rank 3 failed: MESSAGE", or for several "stopping: ranks 1, 3 failed:
// rank 1: ...; rank 3: ..." (the message once when they all say the same).
// `told[i]` is what `ranks[i]` said, for the first told.size() of them
// (none: "stopping: rank 3 failed (see its message)").
std::string peerFailureText(const std::vector<int>& ranks, const std::vector<std::string>& told);

// Gives every rank `root`'s `bytes` (a file only `root` can read: nodes need
// not share a file system). Collective; host memory; two broadcasts.
void shareFrom(Communicator& comm, int root, std::string& bytes);

}  // namespace ddp::comm
