// One run per checkpoint directory.
//
// Note [One run per checkpoint directory]
// Two runs writing checkpoints to one directory (a job submitted twice; two
// jobs of one name under the Slurm template, whose directory is
// checkpoints/<job name>) would delete each other's checkpoints with
// --keep-checkpoints, and a later --resume would continue whichever wrote
// last: another run's model, silently. So rank 0 holds an exclusive flock()
// on <dir>/.ddp_train.lock for as long as it runs, and a second run is
// refused at start-up with the holder's host, process, Slurm job and start
// time, which the holder writes into the file. flock() ends with the process,
// however it ends (kill -9 included), so a crashed run leaves no stale lock;
// the file itself stays, and is not a checkpoint (completeCheckpoints()
// matches checkpoint-<step>.safetensors only). On NFS, Linux maps flock() to
// the server's byte-range locks, so runs on different nodes exclude each
// other too.
#pragma once

#include <string>

namespace ddp::launcher {

class CheckpointDirLock {
 public:
  // Takes the lock on `dir` (which must exist) and records who holds it.
  // Throws DataError naming the holder when another run has it, or naming
  // the file when it cannot be opened. Where the file system has no locks
  // (NFS mounted nolock), warns and holds none.
  explicit CheckpointDirLock(const std::string& dir);
  ~CheckpointDirLock();  // releases the lock; never throws
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

  // <dir>/.ddp_train.lock
  static std::string pathIn(const std::string& dir);

 private:
  int fd_ = -1;
};

}  // namespace ddp::launcher
