// --resume: the checkpoint a run continues from, read once for the whole job.
//
// Rank 0 finds the file (the one --resume names, or the newest complete one
// in --checkpoint-dir), reads and checks it; its tensors reach every other
// rank over the communicator piece by piece, each rank keeping what it
// trains with (Note [Restoring a checkpoint from one rank] in
// trainer/checkpoint_broadcast.h), so nodes need not share the directory
// (Note [Files across nodes] in launcher/main.cc).
#pragma once

#include "comm/communicator.h"
#include "launcher/options.h"
#include "runtime/world.h"
#include "trainer/checkpoint.h"
#include "trainer/optimizer.h"
#include "trainer/sequential.h"

namespace ddp::launcher {

// Restores `model` and `optimizer` from the checkpoint `o.resume` asks for and
// returns where training continues; a default position (start fresh) when
// --checkpoint-dir holds no checkpoint yet. Collective over `comm`. A file
// that cannot be read, is damaged or was written for a different run
// (`options`) throws DataError or MismatchError on every rank (comm::agree);
// when the newest checkpoint is damaged the message names the one before it.
// Logs what it resumed from.
trainer::TrainPosition resumeFromCheckpoint(comm::Communicator& comm, const World& world,
                                            const Options& o, trainer::Sequential& model,
                                            trainer::Optimizer& optimizer,
                                            const trainer::CheckpointOptions& options);

}  // namespace ddp::launcher
