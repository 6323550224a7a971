// CPU quotas (Note [CPU quotas]): the limit read from a fake cgroup tree in
// both versions, and what it does to a rank's threads, the node's CPUs and
// the CPU share a rank expects (Note [Threads per rank]).
#include "runtime/cpu_quota.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "runtime/cgroup.h"
#include "runtime/cpu_share.h"
#include "test_files.h"

namespace ddp {
namespace {

using testing::FakeRoot;

TEST(CgroupDirs, WalkFromTheProcessUpToTheRootSkippingWhatIsNotMounted) {
  FakeRoot root;
  // A container: /proc/self/cgroup names the host's path, only the
  // container's part is mounted, so the root's is the container's.
  root.write("proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  root.write("sys/fs/cgroup/cpu.max", "max 100000\n");
  const auto dirs = cgroupDirs(root.path(), "cpu");
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0].path, root.path() + "/sys/fs/cgroup/");
  EXPECT_EQ(dirs[0].version, CgroupVersion::kV2);
}

TEST(CgroupDirs, AV1ControllerMountedUnderItsJoinedNameOrItsOwn) {
  FakeRoot joined;
  joined.write("proc/self/cgroup", "4:memory:/\n3:cpu,cpuacct:/job\n2:cpuset:/job\n");
  joined.write("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
  const auto dirs = cgroupDirs(joined.path(), "cpu");
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0].path, joined.path() + "/sys/fs/cgroup/cpu,cpuacct/job/");
  EXPECT_EQ(dirs[1].path, joined.path() + "/sys/fs/cgroup/cpu,cpuacct/");
  EXPECT_EQ(dirs[0].version, CgroupVersion::kV1);
  // "cpuacct" and "cpuset" are not "cpu".
  FakeRoot own;
  own.write("proc/self/cgroup", "3:cpuacct:/a\n2:cpuset:/a\n1:cpu:/a\n");
  own.write("sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "-1\n");
  own.write("sys/fs/cgroup/cpuacct/a/cpuacct.usage", "0\n");
  const auto ownDirs = cgroupDirs(own.path(), "cpu");
  ASSERT_EQ(ownDirs.size(), 2u);
  EXPECT_EQ(ownDirs[0].path, own.path() + "/sys/fs/cgroup/cpu/a/");
}

TEST(CgroupNumber, NoLimitAndJunkReadAsNone) {
  FakeRoot root;
  root.write("a", "150000 100000\n");
  root.write("none", "max 100000\n");
  root.write("minus", "-1\n");
  root.write("junk", "12x\n");
  EXPECT_EQ(cgroupNumber(root.path() + "/a"), 150000u);
  EXPECT_EQ(cgroupNumber(root.path() + "/a", 1), 100000u);
  EXPECT_FALSE(cgroupNumber(root.path() + "/a", 2));
  EXPECT_FALSE(cgroupNumber(root.path() + "/none"));
  EXPECT_EQ(cgroupNumber(root.path() + "/none", 1), 100000u);
  EXPECT_FALSE(cgroupNumber(root.path() + "/minus"));
  EXPECT_FALSE(cgroupNumber(root.path() + "/junk"));
  EXPECT_FALSE(cgroupNumber(root.path() + "/missing"));
}

TEST(CpuQuota, NoneWithoutALimit) {
  FakeRoot root;
  EXPECT_FALSE(cpuQuota(root.path()));  // no /proc/self/cgroup at all
  root.write("proc/self/cgroup", "0::/a\n");
  root.write("sys/fs/cgroup/a/cpu.max", "max 100000\n");
  root.write("sys/fs/cgroup/cpu.max", "max 100000\n");
  EXPECT_FALSE(cpuQuota(root.path()));
}

TEST(CpuQuota, TheTightestV2LimitAboveTheProcessWins) {
  FakeRoot root;
  root.write("proc/self/cgroup", "0::/pod/container\n");
  root.write("sys/fs/cgroup/pod/cpu.max", "150000 100000\n");  // the pod: 1.5 CPUs
  root.write("sys/fs/cgroup/pod/container/cpu.max", "max 100000\n");
  auto quota = cpuQuota(root.path());
  ASSERT_TRUE(quota);
  EXPECT_DOUBLE_EQ(quota->cpus, 1.5);
  EXPECT_EQ(quota->cgroup, root.path() + "/sys/fs/cgroup/pod/");
  // A tighter one lower down wins, whatever its period.
  root.write("sys/fs/cgroup/pod/container/cpu.max", "50000 50000\n");
  quota = cpuQuota(root.path());
  ASSERT_TRUE(quota);
  EXPECT_DOUBLE_EQ(quota->cpus, 1.0);
  EXPECT_EQ(quota->cgroup, root.path() + "/sys/fs/cgroup/pod/container/");
}

TEST(CpuQuota, V1ReadsQuotaAndPeriod) {
  FakeRoot root;
  root.write("proc/self/cgroup", "1:cpu:/job\n0::/\n");
  root.write("sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "-1\n");
  root.write("sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n");
  EXPECT_FALSE(cpuQuota(root.path()));
  root.write("sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "400000\n");
  const auto quota = cpuQuota(root.path());
  ASSERT_TRUE(quota);
  EXPECT_DOUBLE_EQ(quota->cpus, 4.0);
}

TEST(ThrottleCounts, BothVersionsCpuStat) {
  FakeRoot root;
  root.write("v1/cpu.stat", "nr_periods 556\nnr_throttled 257\nthrottled_time 89133843\n");
  root.write("v2/cpu.stat",
             "usage_usec 1000\nuser_usec 900\nsystem_usec 100\nnr_periods 40\n"
             "nr_throttled 10\nthrottled_usec 5000\n");
  const auto v1 = throttleCounts(root.path() + "/v1/");
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->periods, 556u);
  EXPECT_EQ(v1->throttled, 257u);
  const auto v2 = throttleCounts(root.path() + "/v2/");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->periods, 40u);
  EXPECT_EQ(v2->throttled, 10u);
  EXPECT_FALSE(throttleCounts(root.path() + "/missing/"));
}

TEST(ThrottleCounts, TheFractionOfThePeriodsBetween) {
  EXPECT_DOUBLE_EQ(*throttledFraction({256, 200}, {556, 257}), 0.19);
  EXPECT_DOUBLE_EQ(*throttledFraction({0, 0}, {100, 100}), 1.0);
  EXPECT_FALSE(throttledFraction({100, 50}, {100, 50}));  // no period passed: idle
  EXPECT_FALSE(throttledFraction({100, 50}, {10, 5}));    // another cgroup's counts
}

// Rounded to the nearest whole CPU (RESULTS.md: 2 threads lose under a
// quota of 1.25 CPUs and win under 1.5).
TEST(ThreadsForQuota, EachRanksShareRoundedAtLeastOne) {
  EXPECT_EQ(threadsForQuota(4.0, 1), 4);
  EXPECT_EQ(threadsForQuota(4.0, 2), 2);
  EXPECT_EQ(threadsForQuota(4.0, 3), 1);
  EXPECT_EQ(threadsForQuota(1.25, 1), 1);
  EXPECT_EQ(threadsForQuota(1.5, 1), 2);
  EXPECT_EQ(threadsForQuota(3.0, 2), 2);
  EXPECT_EQ(threadsForQuota(2.4, 1), 2);
  EXPECT_EQ(threadsForQuota(0.25, 1), 1);
  EXPECT_EQ(threadsForQuota(1.0, 2), 1);
  EXPECT_EQ(threadsForQuota(64.0, 0), 64);
}

// A rank that may run on 32 CPUs (a socket) with 2 ranks there: 16 threads
// by its mask.
CpuShare socketShare() {
  CpuShare share;
  share.threads = 16;
  share.allowed = 32;
  share.sharers = 2;
  share.nodeUsable = 64;
  share.nodeAvailable = 64;
  return share;
}

TEST(ApplyQuota, TheQuotaCapsTheThreadsAndTheNodesCpus) {
  // docker run --cpus 4 on a 64-CPU node, mpirun -np 2 inside.
  CpuShare share = socketShare();
  applyQuota(share, 4.0, 2);
  EXPECT_EQ(share.threads, 2);
  EXPECT_TRUE(share.threadsFromQuota);
  EXPECT_EQ(share.nodeAvailable, 4);
  EXPECT_EQ(share.idleCpus(), 0);  // the 60 CPUs the quota leaves no time for are not idle
  EXPECT_DOUBLE_EQ(expectedCpuShare(share, 2), 1.0);
  EXPECT_DOUBLE_EQ(expectedCpuShare(share, 8), 0.25);  // --threads 8: 16 threads on 4 CPUs' time
  const ThreadCount chosen = chooseThreads(0, share, [](const char*) { return nullptr; });
  EXPECT_EQ(chosen.threads, 2);
  EXPECT_EQ(chosen.source, "a CPU quota of 4 CPUs over 2 ranks");
}

TEST(ApplyQuota, AQuotaAboveTheMasksShareChangesNothing) {
  CpuShare share = socketShare();
  applyQuota(share, 48.0, 2);
  EXPECT_EQ(share.threads, 16);
  EXPECT_FALSE(share.threadsFromQuota);
  EXPECT_EQ(share.nodeAvailable, 48);
  EXPECT_DOUBLE_EQ(expectedCpuShare(share, 16), 1.0);
  EXPECT_EQ(chooseThreads(0, share, [](const char*) { return nullptr; }).source, "");
}

TEST(DescribeQuota, TwoDecimalsAndTheRightNouns) {
  EXPECT_EQ(describeQuota(1.0, 1), "1 CPU over 1 rank");
  EXPECT_EQ(describeQuota(1.5, 2), "1.5 CPUs over 2 ranks");
  EXPECT_EQ(describeQuota(1.0 / 3, 1), "0.33 CPUs over 1 rank");
}

}  // namespace
}  // namespace ddp
