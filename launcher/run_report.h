// What ddp_train tells its user about the run, on rank 0: the start-up
// summary, the buckets, warnings about the placement, each checkpoint, and
// how the run ended.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "launcher/options.h"
#include "launcher/placement.h"
#include "launcher/run_config.h"
#include "launcher/time_limit.h"
#include "runtime/cpu_share.h"
#include "runtime/world.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/sequential.h"
#include "trainer/trainer.h"

namespace ddp::launcher {

// The world, backend and device, the model and the data (rank 0 logs).
void printSummary(const World& world, const comm::Communicator& comm, const Options& o,
                  const ThreadCount& threads, const Placement& placement,
                  trainer::Sequential& model, const Data& data);

// The Reducer's buckets and what travels in them.
void printBuckets(const comm::Reducer& reducer, const Options& o);

// "25 MiB" or "one bucket", for a cap in bytes.
std::string capName(std::size_t cap);

// --bucket-cap-mb auto's choice and each candidate's median step
// (TrainOptions::onBucketCapChosen).
void reportBucketCapChoice(std::size_t cap, const std::vector<std::size_t>& caps,
                           const std::vector<double>& medians, std::size_t steps);

// What --init-from read, when there is more to say than its name: a
// checkpoint's weights without its optimizer state and position, the step
// and evaluation a model file records, tensors converted to float32.
void reportInitFrom(const std::string& path, const trainer::WeightsSource& source);

// Rank 0's warnings about how the job was placed: idle CPUs, more BLAS
// threads than CPUs, and (mpirun across nodes) a daemon keepalive that would
// find a lost node only after --timeout.
void warnAboutPlacement(const World& world, const Options& o, const CpuShare& cpus, int threads);

// What rank 0's checkpoint writer does after each checkpoint is on disk (on
// its thread): logs it and applies --keep-checkpoints.
trainer::CheckpointWriter::WrittenHandler reportCheckpoint(const Options& o);

// How the run ended: a stop by signal or by --time-limit (`timeLimit`, null
// without one) and how to resume, and its memory. Called as soon as the
// stop is agreed, before the last checkpoint's write has finished: after
// Ctrl-C, mpirun kills the ranks one second after its SIGTERM (Note
// [Stopping under mpirun] in runtime/signals.h), and the last writes may
// not fit in it.
void reportRunEnd(const trainer::Trainer& trainer, const Options& o, const TimeLimit* timeLimit);

}  // namespace ddp::launcher
