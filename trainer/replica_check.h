// A check, at each epoch's end and before every checkpoint, that every rank
// still holds the same model.
//
// Note [Checking that the replicas agree]
// Data parallelism rests on one invariant: the replicas start equal (the
// start-up broadcast) and stay equal, since every rank applies the same
// averaged gradients. Nothing checked it during a run. A bit flipped in one
// rank's weights or optimizer state (a memory or CPU fault: the silent data
// corruption that large training fleets report) or a bug that updates one
// rank differently would leave that replica training on its own, its
// gradients still averaged into everyone's, and rank 0 alone writes
// checkpoints, so a fault there would be saved and one elsewhere never
// seen. So at each epoch's end, and before every checkpoint, every rank
// takes the CRC-32 of each tensor a checkpoint holds (weights and optimizer state,
// copied to the host first on a GPU) and the ranks gather them: one
// allgather of 8 bytes per tensor per rank. Equal everywhere, the run goes
// on. Otherwise every rank stops (exit 1) before the checkpoint is written,
// rank 0 naming the ranks outside the majority (without one, as at np=2,
// those outside rank 0's group, saying that it cannot tell which is right),
// their hosts and each one's first differing tensor; every checkpoint on
// disk was then written while the replicas agreed. Megatron-Core offers the
// same check as a utility (check_param_hashes_across_dp_replicas).
// Cost: see benchmarks/RESULTS.md, "Checking that the replicas agree".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "trainer/optimizer.h"
#include "trainer/sequential.h"

namespace ddp::trainer {

// Where in the run the check is made: the replicas were last found equal
// after `agreedStep` (where the run started, or the previous check), and are
// checked again after `step`, in `epoch`.
struct ReplicaCheckPoint {
  std::size_t epoch = 0;
  std::size_t step = 0;
  std::size_t agreedStep = 0;
};

// The report when the ranks' CRCs differ, or nullopt when they agree.
// `crcs[r][t]` is rank r's CRC of tensor `names[t]`; `hosts[r]` names rank
// r's host (may be empty).
std::optional<std::string> describeDivergence(const std::vector<std::vector<std::int64_t>>& crcs,
                                              const std::vector<std::string>& names,
                                              const std::vector<std::string>& hosts,
                                              const ReplicaCheckPoint& at);

// Collective, on every rank at the same point. Returns when every rank holds
// the same weights and optimizer state; otherwise throws MismatchError on every
// rank, rank 0's carrying describeDivergence's report, the others' pointing
// to it.
void verifyReplicasAgree(comm::Communicator& comm, Sequential& model, Optimizer& optimizer,
                         const std::vector<std::string>& hosts, const ReplicaCheckPoint& at);

}  // namespace ddp::trainer
