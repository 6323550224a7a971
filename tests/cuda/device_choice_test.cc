// Which GPU each local rank gets, and the error when there are too few:
// pure functions, so this runs on any machine of a CUDA build.
#include <gtest/gtest.h>

#include "runtime/cuda/device.h"
#include "runtime/error.h"

namespace ddp::cuda {
namespace {

TEST(DeviceChoice, LocalRankModuloVisibleDevices) {
  EXPECT_EQ(deviceForLocalRank(0, 1, 1), 0);
  EXPECT_EQ(deviceForLocalRank(3, 8, 8), 3);
  EXPECT_EQ(deviceForLocalRank(1, 2, 4), 1);  // fewer ranks than GPUs
}

TEST(DeviceChoice, MoreRanksThanGpusNamesBothCounts) {
  try {
    deviceForLocalRank(2, 4, 2);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("4 ranks run on this node"), std::string::npos) << message;
    EXPECT_NE(message.find("only 2 GPUs are visible"), std::string::npos) << message;
  }
}

TEST(DeviceChoice, NoVisibleDeviceIsAUsageError) {
  EXPECT_THROW(deviceForLocalRank(0, 1, 0), UsageError);
}

TEST(DeviceChoice, CountingDevicesNeverThrows) {
  const int count = visibleDeviceCount();  // 0 on machines without a driver
  EXPECT_GE(count, 0);
}

}  // namespace
}  // namespace ddp::cuda
