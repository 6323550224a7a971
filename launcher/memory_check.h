// Start-up check that a run's model fits the node's host memory.
//
// Note [Refusing a model the node cannot hold]
// Host memory is overcommitted: a rank's allocations succeed, and the kernel
// ends a rank with SIGKILL only when a page is first written. A model too big
// for the node therefore ran part-way (the weights were built, the Reducer's
// buckets were being zeroed) and mpirun then said only "exited on signal 9".
// The weights, the gradients, the momentum and a synthetic data set are all
// written in full, so their sum is a lower bound of what the run needs; each
// node's first rank compares its node's share against the memory the kernel
// will give (runtime/memory.h, availableBytes) before any rank loads data or
// builds the model. Activations beyond the layers' outputs, Fashion-MNIST's
// 55 MB and MPI's buffers come on top, so a run that passes may still not
// fit; one that fails cannot.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "launcher/options.h"
#include "runtime/world.h"
#include "trainer/tensor.h"

namespace ddp::launcher {

// What one rank's host memory must hold at least (Note [Refusing a model the
// node cannot hold]).
struct HostMemoryNeed {
  std::size_t parameters = 0;  // of the whole model
  std::size_t weights = 0;     // bytes
  std::size_t gradients = 0;   // bytes: the Reducer's buckets (CPU runs)
  std::size_t momentum = 0;    // bytes: SGD's buffers (CPU runs, momentum > 0)
  std::size_t outputs = 0;     // bytes: each layer's output for one batch (CPU runs)
  std::size_t data = 0;        // bytes: --dataset synthetic's features and labels
  std::size_t total() const { return weights + gradients + momentum + outputs + data; }
};

// On a GPU the model is built on the host, then moved: the host holds the
// weights once; the rest lives on the device.
HostMemoryNeed hostMemoryNeed(const Options& o, trainer::Device device);

// The refusal for `ranks` ranks of `need` each against `available` bytes, or
// nullopt when they fit.
std::optional<std::string> memoryShortfall(const HostMemoryNeed& need, int ranks,
                                           std::size_t available, const std::string& host);

// Each node's first rank: throws UsageError (the options ask more than the
// node has, as with more ranks than GPUs) when the node's ranks cannot hold
// the run. Call inside agree(), and let it finish before any rank loads data
// or builds the model.
void checkNodeMemory(const Options& o, const World& world, trainer::Device device);

}  // namespace ddp::launcher
