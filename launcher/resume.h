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

// Note [Resuming or starting from --init-from]
// --resume without a FILE continues the newest checkpoint in
// --checkpoint-dir, and starts fresh while there is none; --init-from
// starts a run from given weights. Together they mean: continue the
// checkpoint when there is one, else start from --init-from's weights.
// That is what a job that fine-tunes needs once it can be requeued: its
// first run starts from the pretrained weights, and a requeued one goes on
// from its own last checkpoint, not from them again (Megatron-Core's
// --pretrained-checkpoint, read only when --load holds no checkpoint, is
// the same rule). The Slurm template passes --resume always, so before
// this rule its jobs could not use --init-from at all. --resume FILE
// names a checkpoint to continue, so with --init-from it is still refused.
// --evaluate reads the weights the same options would train from
// (weightsToEvaluate in launcher/evaluate.h).

// Rank 0: the checkpoint the run continues: the FILE --resume names, or
// without one the newest complete checkpoint in --checkpoint-dir; "" when
// there is none or no --resume (then --init-from's weights, if given, start
// the run: the Note above). Throws DataError when FILE is a directory.
std::string checkpointToResume(const Options& o);

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
