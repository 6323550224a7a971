// Restoring a checkpoint on every rank of a job from the one rank that read
// it.
//
// Note [Restoring a checkpoint from one rank]
// Only the root (rank 0) reads the checkpoint --resume continues from: nodes
// need not share its directory (Note [Files across nodes] in
// launcher/main.cc). The root also checks it (checkCheckpoint) against its own
// model and optimizer, which equal every other rank's: the ranks compare
// their options at start-up, and the first collective here compares the
// tensors' names and sizes once more. Then the tensors travel in one fixed
// order, the model's parameters and then the optimizer's state slots, each
// in pieces of at most kRestorePieceBytes through one host buffer: the root
// copies a piece out of the file, broadcasts it, and every rank copies out
// what it keeps (all of a parameter; of a slot, what
// Optimizer::restoreState keeps: all, or a sharded optimizer's part).
//
// Until this, the whole file went to every rank, which then copied what it
// needed out of it: for AdamW three model sizes beside a rank's own copies,
// on every rank, and for a sharded optimizer the whole state too, that
// sharding was there to divide. Now a rank holds one piece beyond what it
// trains with. The root too: it maps the file (loadSafetensors), and once a
// piece has been broadcast it releases the piece's pages (Note [Reading
// files through a mapping] in runtime/mapped_file.h), where it used to hold
// the whole file in its own memory until the last piece, which the start-up
// memory check had to count. Pieces also keep each broadcast far below MPI's
// int count: a file of 2 GiB or more could not be sent at all.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "trainer/checkpoint.h"
#include "trainer/optimizer.h"
#include "trainer/safetensors.h"
#include "trainer/sequential.h"

namespace ddp::trainer {

inline constexpr std::size_t kRestorePieceBytes = std::size_t{4} << 20;

// Restores every rank's `model` and `optimizer` from the checkpoint the root
// read and checked: `file` and `checked` are the root's (file holds the
// tensors; checked, checkCheckpoint's verdict), ignored elsewhere (null
// there). The root releases each piece of `file` once sent
// (SafetensorsFile::release). Returns the position on every rank. Collective over `comm`, on
// the training thread. Throws MismatchError on every rank when some rank's
// model or optimizer state differs from the root's (names, sizes).
// `pieceBytes` is for tests.
TrainPosition restoreCheckpointFromRoot(comm::Communicator& comm, int root,
                                        const SafetensorsFile* file,
                                        const CheckedCheckpoint& checked, Sequential& model,
                                        Optimizer& optimizer,
                                        std::size_t pieceBytes = kRestorePieceBytes);

}  // namespace ddp::trainer
