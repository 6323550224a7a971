#include "launcher/resume.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "launcher/run_config.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"
#include "trainer/checkpoint_broadcast.h"
#include "trainer/safetensors.h"

namespace ddp::launcher {

std::string checkpointToResume(const Options& o) {
  if (o.resume.empty()) return "";
  if (o.resume != "latest") {
    if (std::filesystem::is_directory(o.resume)) {
      throw DataError(str("--resume ", o.resume,
                          ": is a directory; to use the newest checkpoint in it, give "
                          "--checkpoint-dir ",
                          o.resume, " --resume (without a FILE)"));
    }
    return o.resume;
  }
  const std::vector<std::string> all = trainer::completeCheckpoints(o.checkpointDir);
  return all.empty() ? std::string() : all.back();
}

trainer::TrainPosition resumeFromCheckpoint(comm::Communicator& comm, const World& world,
                                            const Options& o, trainer::Sequential& model,
                                            trainer::Optimizer& optimizer,
                                            const trainer::CheckpointOptions& options) {
  std::string file;
  // Rank 0's alone (Note [Restoring a checkpoint from one rank]).
  trainer::SafetensorsFile parsed;
  trainer::CheckedCheckpoint checked;
  comm::agree(comm, [&] {
    if (world.rank() != 0) return;
    file = checkpointToResume(o);
    if (file.empty()) return;
    try {
      parsed = trainer::loadSafetensors(file);
    } catch (const DataError& e) {
      const auto all = o.resume == "latest" ? trainer::completeCheckpoints(o.checkpointDir)
                                            : std::vector<std::string>{};
      if (all.size() < 2) throw;
      // A damaged newest checkpoint: say how to fall back, but do not do it
      // unasked (damage means a disk or a copy to look at).
      throw DataError(str(e.what(), "; to resume from the checkpoint before it, ",
                          all[all.size() - 2], ", move ", file, " out of ", o.checkpointDir));
    }
    checked = trainer::checkCheckpoint(file, parsed, model, optimizer, options);
  });
  comm::shareFrom(comm, 0, file);
  if (file.empty()) {
    log::info(str("resume: no checkpoint in ", o.checkpointDir, " yet; starting ",
                  o.initFrom.empty() ? std::string("fresh")
                                     : str("from the weights of --init-from ", o.initFrom)));
    // A requeued job that finds nothing most likely lost its checkpoints to
    // another node's local disk: starting over silently would hide that.
    const char* restarts = std::getenv("SLURM_RESTART_COUNT");
    if (world.rank() == 0 && naturalNumber(restarts).value_or(0) > 0) {  // its disk was looked at
      log::warn(str("resume: this Slurm job was requeued (SLURM_RESTART_COUNT=", restarts, ") but ",
                    o.checkpointDir, " on ", world.hostname(),
                    " holds no checkpoint: if the earlier run wrote its checkpoints on another "
                    "node's local disk they are still there, and this run starts over; keep "
                    "--checkpoint-dir on a file system every node sees"));
    }
    return {};
  }
  const trainer::TrainPosition start = trainer::restoreCheckpointFromRoot(
      comm, 0, world.rank() == 0 ? &parsed : nullptr, checked, model, optimizer);
  parsed = {};  // the file's bytes, before training needs the memory
  // Note [What may change on resume] in launcher/run_config.h.
  std::vector<std::string> changes;
  if (start.worldSize != world.size()) {
    changes.push_back(str("written by ", start.worldSize,
                          " ranks; the rest of the epoch is re-sharded over ", world.size()));
  }
  if (start.globalBatch > 0 && start.globalBatch != globalBatch(o, world.size())) {
    changes.push_back(str("global batch ", describeGlobalBatch(o, world.size()), ", was ",
                          start.globalBatch, "; --lr stays ", o.lr));
  }
  log::info(str("resume: from ", file, ": epoch ", start.epoch, " with ", start.consumed,
                " of its samples done, step ", start.globalStep,
                changes.empty() ? std::string() : str(" (", join(changes, "; "), ")")));
  if (!o.initFrom.empty()) {  // Note [Resuming or starting from --init-from]
    log::info(str("resume: --init-from ", o.initFrom,
                  " is not read: it starts a run while --checkpoint-dir holds no checkpoint"));
  }
  // A finished run resumed with the same length: correct to do nothing, but
  // not silently.
  const bool stepsDone = o.maxSteps > 0 && start.globalStep >= o.maxSteps;
  if (world.rank() == 0 && (stepsDone || start.epoch > o.epochs)) {
    log::warn(str("resume: the checkpoint is past the end of this run (",
                  stepsDone
                      ? str("step ", start.globalStep, ", --max-steps ", o.maxSteps)
                      : str(start.consumed > 0 ? str("it is part-way through epoch ", start.epoch)
                                               : str("it ends epoch ", start.epoch - 1),
                            ", --epochs ", o.epochs),
                  "): nothing is left to train; raise ", stepsDone ? "--max-steps" : "--epochs",
                  " to go on"));
  }
  return start;
}

}  // namespace ddp::launcher
