// --inject-fault: make one rank misbehave on purpose, for the tests that show
// what the watchdog and the non-finite check report (tests/e2e/faults.sh).
//
//   stall:R:S:SECONDS  rank R sleeps SECONDS before step S (a slow or hung
//                      rank); S = 0: while it loads the data at start-up
//   slow:R:S:SECONDS   rank R sleeps SECONDS before every step from S on (a
//                      straggler: a slower node, a noisy neighbour)
//   desync:R:S         rank R issues one extra collective before step S (a
//                      program that diverged)
//   nonfinite:R:S      rank R's gradients of step S are NaN (a bad batch)
//   bitflip:R:S        rank R flips one bit of its first parameter before step
//                      S (silent data corruption: a memory or CPU fault)
//   error:R:S          rank R fails with an error before step S, alone (the
//                      others learn of it only through the watchdog)
//   oom:R:S            rank R allocates a tensor no device can hold before
//                      step S (4 PiB, on the model's device): the
//                      out-of-memory error a model too large for it meets;
//                      oom:all:S, on every rank alike
//   hang:R:S:SECONDS   rank R's first collective of step S waits SECONDS
//                      where the library runs it (Communicator::
//                      holdNextCollective), every rank having arrived: a
//                      network or a library stuck in a collective
//
// R may be "all": stall:all:S:SECONDS stalls every rank outside any
// collective, where no collective timeout fires (Note [Where a stuck rank
// is] in comm/watchdog.h).
//
// Steps count from 1 over the whole run. Not for production use: the option
// is listed under "Testing" in --help.
#pragma once

#include <cstddef>
#include <string>

#include "comm/communicator.h"
#include "trainer/sequential.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

struct FaultInjection {
  enum class Kind {
    kNone,
    kStall,
    kSlow,
    kDesync,
    kNonFinite,
    kBitFlip,
    kError,
    kOutOfMemory,
    kHang
  };
  static constexpr int kAllRanks = -1;
  Kind kind = Kind::kNone;
  int rank = 0;  // or kAllRanks
  std::size_t step = 0;
  double seconds = 0.0;
};

// Parses the option's value; "" is no fault. Throws UsageError.
FaultInjection parseFaultInjection(const std::string& text);

// stall:R:0:SECONDS on rank R (or all): sleeps there and then. Called where
// the ranks load their data.
void stallAtStartUp(const FaultInjection& fault, int rank);

// Installs the fault's hooks (TrainOptions::beforeStep, poisonGradients) on
// the rank it names; other ranks get none. `model` (the bit flip's target)
// must outlive the training run.
void installFault(const FaultInjection& fault, comm::Communicator& comm, trainer::Sequential& model,
                  trainer::TrainOptions& options);

}  // namespace ddp::launcher
