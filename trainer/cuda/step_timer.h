// Where a GPU step's time goes, measured on the device.
//
// On the GPU the host only enqueues work, so host clocks measure how fast the
// step was issued, not how long it ran. The timer records a timing event on
// the compute stream at each phase boundary and turns them into durations
// once the device has run them: take() is called where the trainer reads the
// loss anyway, so timing adds no host synchronisation.
//
// Training thread only.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <vector>

namespace ddp::trainer::cuda {

class StepTimer {
 public:
  // Phases are indices 0..kPhases-1, in the order of trainer::PhaseTimes
  // (the trainer names them).
  static constexpr std::size_t kPhases = 5;
  using Durations = std::array<double, kPhases>;  // seconds

  StepTimer() = default;
  ~StepTimer();  // never throws
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  // A step starts: records its first event.
  void beginStep();
  // `phase` ends here (the time since the previous mark is `phase`'s).
  void mark(std::size_t phase);
  // The durations of every step begun since the last take(), oldest first.
  // Waits for the device to reach the last mark.
  std::vector<Durations> take();

 private:
  struct Mark {
    cudaEvent_t event = nullptr;
    std::size_t phase = kPhases;  // kPhases: a step's start
  };
  cudaEvent_t nextEvent();
  std::vector<cudaEvent_t> pool_;  // every event ever created, reused in order
  std::vector<Mark> marks_;        // since the last take()
};

}  // namespace ddp::trainer::cuda
