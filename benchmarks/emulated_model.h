// The emulated model behind ddp_bench: a profile's parameter tensors, whose
// gradients the real Reducer reduces while backward is emulated by real
// compute. Each layer's gradient is written by an SGEMM of 2 x (its
// parameters) x K flops (K = work), in reverse layer order, and marked ready
// as it would be in training; forward runs the same GEMMs into scratch, and
// the optimizer is a pass over parameters and gradients.
//
// Two implementations with one interface: on the host (OpenBLAS, the MPI
// backend) and on the rank's GPU (cuBLAS on the compute stream, the NCCL
// backend; built with CUDA only). The Reducer holds the gradients either way,
// in the memory its communicator allocates.
//
// Training thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "benchmarks/model_profiles.h"
#include "comm/reducer.h"

namespace ddp::bench {

// Where one step's time went (seconds). On the GPU: the device's time between
// the phases' ends, measured with events on the compute stream, so `comm` is
// how long that stream waited for the all-reduces after backward.
struct Phases {
  double forward = 0, backward = 0, comm = 0, optimizer = 0;
  double total() const { return forward + backward + comm + optimizer; }
};

class EmulatedModel {
 public:
  // Draws the GEMM inputs from a generator seeded with `rank`, so every
  // rank's gradients differ, as in data-parallel training.
  EmulatedModel(Profile profile, int rank);
  virtual ~EmulatedModel() = default;
  EmulatedModel(const EmulatedModel&) = delete;
  EmulatedModel& operator=(const EmulatedModel&) = delete;

  // Every tensor of the profile, in registration order: the Reducer's specs.
  const std::vector<comm::GradientSpec>& specs() const { return specs_; }
  const Profile& profile() const { return profile_; }
  std::size_t work() const { return work_; }

  // Sets K and draws the GEMM inputs for it: A (rows x K, enough rows for
  // the largest layer) and B (K x kGemmColumns), uniform in [-1, 1].
  void setWork(std::size_t work);

  // One step: forward, backward into `reducer`'s gradients (marking each
  // layer ready), Reducer::finalize, the optimizer. Returns once the step
  // has run (on the GPU: the host waits for the device at the step's end).
  virtual Phases step(comm::Reducer& reducer) = 0;

  // Gradient `index` as the Reducer holds it (after step(): reduced), readable
  // on the host: the Reducer's own storage on the CPU, a copy into `staging`
  // on the GPU. Valid until the next call with the same `staging`.
  virtual std::span<const float> hostGradient(comm::Reducer& reducer, std::size_t index,
                                              std::vector<float>& staging) = 0;

 protected:
  // Keeps setWork()'s inputs where compute() reads them.
  virtual void setInputs(std::vector<float> a, std::vector<float> b) = 0;
  // out (n floats, where this model computes) = an SGEMM of 2 x n x K flops.
  virtual void compute(float* out, std::size_t n) const = 0;
  // Each layer's GEMM into `scratch` (largestLayer() floats).
  void forward(float* scratch) const;
  // Writes each layer's gradients (last layer first) into `reducer`'s
  // storage and marks them ready, as backward does in training.
  void backward(comm::Reducer& reducer) const;

  // Elements of the largest layer: the scratch forward writes into and the
  // rows of the GEMM input.
  std::size_t largestLayer() const { return largest_; }

 private:
  Profile profile_;
  std::vector<comm::GradientSpec> specs_;
  std::size_t largest_ = 0;
  std::size_t work_ = 0;
  std::mt19937 random_;
};

// The GEMMs' output width: a gradient of n elements is (n / kColumns) rows
// of kColumns plus a tail row.
inline constexpr std::size_t kGemmColumns = 256;

// On the host, with OpenBLAS.
std::unique_ptr<EmulatedModel> makeHostModel(const Profile& profile, int rank, std::size_t work);

// On the calling thread's current GPU, with cuBLAS on the compute stream
// (Note [One compute stream] in runtime/cuda/context.h); its Reducer must sit
// on the NCCL communicator. Defined only in builds with CUDA.
std::unique_ptr<EmulatedModel> makeDeviceModel(const Profile& profile, int rank, std::size_t work);

}  // namespace ddp::bench
