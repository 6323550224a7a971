// Which GPU a rank uses, and what it is.
//
// Rank r on a node uses visible device (local rank % visible devices); the
// CUDA runtime applies CUDA_VISIBLE_DEVICES, so "visible device 0" is the
// first listed there. More ranks on a node than visible devices is a usage
// error raised before any NCCL call (NCCL's own message would be
// "Duplicate GPU detected").
#pragma once

#include <cstddef>
#include <string>

namespace ddp::cuda {

// Devices this process can see; 0 when there is no driver or no device.
// Never throws.
int visibleDeviceCount();

// The device local rank `localRank` of `localSize` uses when `visible`
// devices are visible. Throws UsageError naming both counts when
// localSize > visible (or nothing is visible). Pure: testable without a GPU.
int deviceForLocalRank(int localRank, int localSize, int visible);

struct DeviceInfo {
  int index = 0;      // among the visible devices
  std::string name;   // "NVIDIA H200"
  std::string busId;  // "0000:1b:00.0"
  std::size_t memoryBytes = 0;
  int computeMajor = 0;  // compute capability, e.g. 9.0
  int computeMinor = 0;
};

// Properties of visible device `index`. Throws DeviceError.
DeviceInfo deviceInfo(int index);

// Makes `index` the current device of the calling thread (cudaSetDevice).
// Threads that the runtime starts (the NCCL watchdog) call it too.
void setDevice(int index);

// The current device of the calling thread.
int currentDevice();

}  // namespace ddp::cuda
