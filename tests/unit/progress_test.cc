// Note [Finding a straggler]: the slowest rank against the others' median,
// by a ratio and by at least a millisecond.
#include "launcher/progress.h"

#include <gtest/gtest.h>

namespace ddp::launcher {
namespace {

TEST(Straggler, TheSlowestRankIsNamedWithItsHost) {
  // The others' median is 10 ms (9.8, 10, 10.5): rank 3 took 2.5x that.
  EXPECT_EQ(stragglerWarning(4, {10.0, 10.5, 9.8, 25.0}, {"a", "a", "b", "b"}),
            "epoch 4: rank 3 (b) took 2.50x the other ranks' median compute per step (25.00 ms "
            "against 10.00 ms: data, forward, backward and optimizer); every all-reduce waits for "
            "it, so the job runs at its pace");
  // Two ranks: against the other one, not a mean the straggler is half of.
  const auto pair = stragglerWarning(1, {2.0, 11.0}, {"vm", "vm"});
  ASSERT_TRUE(pair);
  EXPECT_NE(pair->find("rank 1 (vm) took 5.50x"), std::string::npos) << *pair;
}

TEST(Straggler, RanksWithinTheRatioOrAloneAreNotStragglers) {
  EXPECT_FALSE(stragglerWarning(1, {10.0, 12.4}, {"a", "b"}));  // 1.24x
  EXPECT_TRUE(stragglerWarning(1, {10.0, 12.6}, {"a", "b"}));   // 1.26x
  EXPECT_FALSE(stragglerWarning(1, {0.28, 0.62}, {"a", "b"}));  // 2.2x, but 0.34 ms: noise
  EXPECT_FALSE(stragglerWarning(1, {10.0}, {"a"}));
  EXPECT_FALSE(stragglerWarning(1, {0.0, 0.0}, {"a", "b"}));  // an epoch without timed steps
  EXPECT_FALSE(stragglerWarning(1, {}, {}));
}

}  // namespace
}  // namespace ddp::launcher
