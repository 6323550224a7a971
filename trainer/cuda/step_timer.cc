#include "trainer/cuda/step_timer.h"

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_check.h"

namespace ddp::trainer::cuda {

StepTimer::~StepTimer() {
  for (cudaEvent_t event : pool_)
    (void)cudaEventDestroy(event);
}

cudaEvent_t StepTimer::nextEvent() {
  if (marks_.size() == pool_.size()) {
    cudaEvent_t event = nullptr;
    DDP_CUDA_CHECK(cudaEventCreate(&event));  // with timing
    pool_.push_back(event);
  }
  return pool_[marks_.size()];
}

void StepTimer::beginStep() {
  cudaEvent_t event = nextEvent();
  DDP_CUDA_CHECK(cudaEventRecord(event, ddp::cuda::computeStream()));
  marks_.push_back({event, kPhases});
}

void StepTimer::mark(std::size_t phase) {
  cudaEvent_t event = nextEvent();
  DDP_CUDA_CHECK(cudaEventRecord(event, ddp::cuda::computeStream()));
  marks_.push_back({event, phase});
}

std::vector<StepTimer::Durations> StepTimer::take() {
  std::vector<Durations> steps;
  if (marks_.empty()) return steps;
  DDP_CUDA_CHECK(cudaEventSynchronize(marks_.back().event));
  for (std::size_t i = 0; i < marks_.size(); ++i) {
    if (marks_[i].phase == kPhases) {
      steps.push_back(Durations{});
      continue;
    }
    if (i == 0 || steps.empty()) continue;  // a mark before any step: nothing to attribute
    float milliseconds = 0.0f;
    DDP_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, marks_[i - 1].event, marks_[i].event));
    steps.back()[marks_[i].phase] += milliseconds / 1000.0;
  }
  marks_.clear();
  return steps;
}

}  // namespace ddp::trainer::cuda
