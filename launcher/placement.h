// Where each rank trains: --device resolved on every rank at start-up.
//
// auto picks CUDA when this build has it and a GPU is visible, else the CPU.
// With CUDA, local rank r uses visible GPU r % count and more ranks on a node
// than GPUs is a usage error (runtime/cuda/device.h), found before NCCL starts.
// Every rank must land on the same kind of device (one communicator backend
// for the whole job); the ranks agree on it with one MPI_Allreduce, so a
// problem on any rank stops all of them with one message.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "launcher/options.h"
#include "runtime/error.h"
#include "runtime/world.h"
#include "trainer/tensor.h"

namespace ddp::launcher {

struct Placement {
  trainer::Device device = trainer::Device::kCpu;
  int gpu = -1;          // visible device index (CUDA)
  std::string summary;   // "cuda: NVIDIA H200 (x1 per rank)" or "cpu"
  std::string rankLine;  // "host a, rank 3, local rank 1, GPU 1 NVIDIA H200, bus 0000:1b:00.0"
  // Set when --device cannot be honoured: the message, and whether this rank
  // prints it (one rank does; all exit with the usage code).
  std::string error;
  bool printsError = false;
};

// Collective over the world. Makes the chosen GPU current on this thread.
Placement choosePlacement(const Options& options, const World& world);

// Prints every rank's rankLine, in rank order, on rank 0 (collective).
void printPlacements(const Placement& placement, const World& world);

// The communicator for the placement: MPI on the CPU, NCCL (with an MPI
// communicator inside for host buffers) on CUDA. `onFatal` receives the
// failure of a collective the NCCL watchdog gave up on, on its thread (Note
// [NCCL watchdog]): a CommTimeoutError for one that timed out.
std::unique_ptr<comm::Communicator> makeCommunicator(const Placement& placement, const World& world,
                                                     comm::CommOptions options,
                                                     std::function<void(const CommError&)> onFatal);

}  // namespace ddp::launcher
