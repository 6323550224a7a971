// The emulated model on the rank's GPU (benchmarks/emulated_model.h).
//
// Everything runs on the compute stream, in the order training issues it:
// the GEMMs that write a layer's gradients come before the markReady() that
// may launch their bucket, and the NCCL backend makes its communication
// stream wait for an event recorded there (Note [NCCL stream ordering] in
// comm/nccl), so the all-reduces overlap the GEMMs of earlier layers without
// the host waiting. The host waits once per step, at its end, to read the
// step's timing events: a benchmark step, unlike a training step, must be
// measured before the next one starts.
#include <cublas_v2.h>

#include <span>

#include "benchmarks/emulated_model.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublas_library.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/memory.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/step_timer.h"

namespace ddp::bench {
namespace {

// StepTimer phases (indices into its durations).
enum : std::size_t { kForward, kBackward, kComm, kOptimizer };

class DeviceModel final : public EmulatedModel {
 public:
  DeviceModel(const Profile& profile, int rank)
      : EmulatedModel(profile, rank),
        parameters_(allocateFloats(profile.parameterCount())),
        scratch_(allocateFloats(largestLayer())) {
    trainer::cuda::fill(floats(parameters_), profile.parameterCount(), 0.01f);
  }

  Phases step(comm::Reducer& reducer) override {
    timer_.beginStep();
    forward(floats(scratch_));
    timer_.mark(kForward);
    reducer.prepareForBackward(true);
    backward(reducer);
    timer_.mark(kBackward);
    reducer.finalize();  // the compute stream waits for the buckets; the host does not
    timer_.mark(kComm);
    optimizerStep(reducer);
    timer_.mark(kOptimizer);
    const auto durations = timer_.take().back();  // the host waits here, once per step
    return {durations[kForward], durations[kBackward], durations[kComm], durations[kOptimizer]};
  }

  std::span<const float> hostGradient(comm::Reducer& reducer, std::size_t index,
                                      std::vector<float>& staging) override {
    const std::span<float> g = reducer.gradient(index);
    staging.resize(g.size());
    cuda::copyToHost(staging.data(), g.data(), g.size_bytes());  // waits for the compute stream
    return staging;
  }

 private:
  static std::shared_ptr<void> allocateFloats(std::size_t count) {
    return cuda::allocateDevice(std::max<std::size_t>(count, 1) * sizeof(float));
  }
  static float* floats(const std::shared_ptr<void>& memory) {
    return static_cast<float*>(memory.get());
  }

  // The inputs drawn on the host, as on the CPU, copied to the device.
  void setInputs(std::vector<float> a, std::vector<float> b) override {
    a_ = allocateFloats(a.size());
    b_ = allocateFloats(b.size());
    cuda::copyToDevice(a_.get(), a.data(), a.size() * sizeof(float));
    cuda::copyToDevice(b_.get(), b.data(), b.size() * sizeof(float));
  }

  // out (n floats, row-major rows of kGemmColumns) = A x B: 2 x n x K flops.
  // cuBLAS is column-major, so it computes the transpose, out^T = B^T A^T,
  // which has the same bytes.
  void compute(float* out, std::size_t n) const override {
    const std::size_t rows = n / kGemmColumns, tail = n % kGemmColumns;
    const int k = static_cast<int>(work()), columns = static_cast<int>(kGemmColumns);
    const float one = 1.0f, zero = 0.0f;
    const float* a = floats(a_);
    const float* b = floats(b_);
    if (rows > 0) {
      DDP_CUBLAS_CHECK(cuda::cublas().sgemm(cuda::blasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, columns,
                                            static_cast<int>(rows), k, &one, b, columns, a, k,
                                            &zero, out, columns));
    }
    if (tail > 0) {
      DDP_CUBLAS_CHECK(cuda::cublas().sgemm(
          cuda::blasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(tail), 1, k, &one, b,
          columns, a, k, &zero, out + rows * kGemmColumns, static_cast<int>(tail)));
    }
  }

  // p -= 1e-6 x g per tensor: the same pass as on the host.
  void optimizerStep(comm::Reducer& reducer) {
    std::size_t offset = 0;
    for (std::size_t t = 0; t < specs().size(); ++t) {
      const std::span<float> gradient = reducer.gradient(t);
      trainer::cuda::sgdUpdate(floats(parameters_) + offset, gradient.data(), nullptr,
                               gradient.size(), 1e-6f, 0.0f, 0.0f, false, true, nullptr);
      offset += gradient.size();
    }
  }

  std::shared_ptr<void> parameters_, scratch_, a_, b_;
  trainer::cuda::StepTimer timer_;
};

}  // namespace

std::unique_ptr<EmulatedModel> makeDeviceModel(const Profile& profile, int rank, std::size_t work) {
  auto model = std::make_unique<DeviceModel>(profile, rank);
  model->setWork(work);
  return model;
}

}  // namespace ddp::bench
