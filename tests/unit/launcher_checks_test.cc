// Start-up checks: the keepalive for mpirun across nodes (Note [Lost nodes
// under mpirun]) and the threads per rank (Note [Threads per rank]).
#include "launcher/launcher_checks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/str.h"

namespace ddp::launcher {
namespace {

using Environment = std::map<std::string, std::string>;

// A getenv over `env`.
std::function<const char*(const char*)> lookup(const Environment& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Keepalive fromEnv(const Environment& env) {
  return keepaliveFromEnvironment(lookup(env));
}

TEST(Keepalive, OpenMpiDefaultsWhenNothingIsSet) {
  const Keepalive k = fromEnv({});
  EXPECT_EQ(k.time, 300);
  EXPECT_EQ(k.interval, 20);
  EXPECT_EQ(k.probes, 9);
  EXPECT_EQ(k.worstCase(), 480);
}

TEST(Keepalive, ReadsTheMcaVariablesMpirunExports) {
  const Keepalive k = fromEnv({{"OMPI_MCA_oob_tcp_keepalive_time", "6"},
                               {"OMPI_MCA_oob_tcp_keepalive_intvl", "2"},
                               {"OMPI_MCA_oob_tcp_keepalive_probes", "3"}});
  EXPECT_EQ(k.worstCase(), 12);
}

// atoi read "6s" as 6 and junk as 0 (a keepalive that never fires, in
// the warning's arithmetic); what is not a whole number is now unset.
TEST(Keepalive, ValuesThatAreNotWholeNumbersLeaveTheDefaults) {
  const Keepalive k = fromEnv({{"OMPI_MCA_oob_tcp_keepalive_time", "6s"},
                               {"OMPI_MCA_oob_tcp_keepalive_intvl", ""},
                               {"OMPI_MCA_oob_tcp_keepalive_probes", "-3"}});
  EXPECT_EQ(k.time, 300);
  EXPECT_EQ(k.interval, 20);
  EXPECT_EQ(k.probes, 9);
}

TEST(NaturalNumber, OnlyAWholeNumberAndNothingElse) {
  EXPECT_EQ(naturalNumber("0"), 0);
  EXPECT_EQ(naturalNumber("17"), 17);
  EXPECT_EQ(naturalNumber("007"), 7);
  EXPECT_EQ(naturalNumber("9223372036854775807"), LONG_MAX);
  for (const char* junk :
       {"", " 1", "1 ", "+1", "-1", "1.5", "12abc", "abc", "0x10", "9223372036854775808"}) {
    EXPECT_EQ(naturalNumber(junk), std::nullopt) << "'" << junk << "'";
  }
  EXPECT_EQ(naturalNumber(nullptr), std::nullopt);
  EXPECT_EQ(naturalNumber<int>("2147483647"), INT_MAX);
  EXPECT_EQ(naturalNumber<int>("2147483648"), std::nullopt);  // past int's range
}

// A 64-byte buffer once cut 1e300 to its first 63 characters: a wrong number.
TEST(Fixed, EveryDigitOfLargeValuesAndTheUsualOnes) {
  EXPECT_EQ(fixed(3.14159, 2), "3.14");
  EXPECT_EQ(fixed(-0.5, 0), "-0");
  const double big = std::stod("1e300");  // not a constant the compiler checks
  const std::string huge = fixed(big, 2);
  EXPECT_EQ(huge.size(), 304u);
  EXPECT_EQ(huge.substr(0, 2), "10");
  EXPECT_EQ(huge.substr(301), ".00");
  EXPECT_EQ(std::stod(huge), big);
  EXPECT_EQ(fixed(-big, 0).size(), 302u);
}

TEST(Keepalive, DefaultsWarnWithTheDefaultTimeoutAndSuggestAWorkingSetting) {
  const auto warning = keepaliveWarning(Keepalive{}, 300, 60);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("up to 480 s (oob_tcp_keepalive_time 300 + 9 probes x 20 s)"),
            std::string::npos)
      << *warning;
  // The suggestion: probes outlast the stall warning, the whole ends before the timeout.
  const Keepalive s = suggestedKeepalive(300, 60);
  EXPECT_GT(s.interval * s.probes, 60 + 2);
  EXPECT_LT(s.worstCase(), 300);
  EXPECT_NE(warning->find("--mca oob_tcp_keepalive_time " + std::to_string(s.time) +
                          " --mca oob_tcp_keepalive_intvl " + std::to_string(s.interval) +
                          " --mca oob_tcp_keepalive_probes " + std::to_string(s.probes)),
            std::string::npos)
      << *warning;
  EXPECT_FALSE(keepaliveWarning(s, 300, 60).has_value());
}

TEST(Keepalive, ASuggestionAlwaysEndsBeforeTheTimeout) {
  for (double timeout : {4.0, 8.0, 20.0, 30.0, 60.0, 300.0, 3600.0}) {
    const Keepalive s = suggestedKeepalive(timeout, timeout / 2);
    EXPECT_LT(s.worstCase(), timeout) << "timeout " << timeout;
    EXPECT_GE(s.time, 1);
    EXPECT_FALSE(keepaliveWarning(s, timeout, timeout / 2).has_value()) << timeout;
  }
}

TEST(Keepalive, KeepaliveOffAlwaysWarns) {
  Keepalive off;
  off.time = 0;
  const auto warning = keepaliveWarning(off, 300, 60);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("keepalive off"), std::string::npos) << *warning;
}

CpuMask cpus(std::initializer_list<int> list) {
  CpuMask mask;
  for (int cpu : list)
    mask.set(static_cast<std::size_t>(cpu));
  return mask;
}

CpuMask range(int first, int last) {
  CpuMask mask;
  for (int cpu = first; cpu <= last; ++cpu)
    mask.set(static_cast<std::size_t>(cpu));
  return mask;
}

TEST(ThreadsPerRank, ARankBoundToItsOwnCoreRunsOneThread) {
  // mpirun -np 2 on a 64-core node: each rank bound to one core.
  const std::vector<CpuMask> node = {cpus({0}), cpus({1})};
  EXPECT_EQ(threadsForMask(node[0], node), 1);
  EXPECT_EQ(threadsForMask(node[1], node), 1);
}

TEST(ThreadsPerRank, RanksBoundToOneSocketShareIt) {
  // mpirun -np 8 on two 32-core sockets: four ranks per socket.
  std::vector<CpuMask> node(4, range(0, 31));
  node.insert(node.end(), 4, range(32, 63));
  for (const CpuMask& mine : node)
    EXPECT_EQ(threadsForMask(mine, node), 8);
}

TEST(ThreadsPerRank, UnboundRanksDivideTheNode) {
  const std::vector<CpuMask> node(3, range(0, 15));
  EXPECT_EQ(threadsForMask(node[0], node), 5);
  // More ranks than CPUs still run one thread each.
  const std::vector<CpuMask> crowded(4, range(0, 1));
  EXPECT_EQ(threadsForMask(crowded[0], crowded), 1);
}

// A count the user gave wins over the share: --threads, then
// OMP_NUM_THREADS, then OPENBLAS_NUM_THREADS.
TEST(ThreadsPerRank, AnExplicitCountWinsOverTheShare) {
  CpuShare share;
  share.threads = 8;
  const auto chosen = [&](int requested, const Environment& env) {
    const ThreadCount count = chooseThreads(requested, share, lookup(env));
    return std::pair(count.threads, count.source);
  };
  EXPECT_EQ(chosen(0, {}), std::pair(8, std::string()));
  EXPECT_EQ(chosen(0, {{"OMP_NUM_THREADS", "1"}}), std::pair(1, std::string("OMP_NUM_THREADS")));
  EXPECT_EQ(chosen(0, {{"OMP_NUM_THREADS", "4,2"}}), std::pair(4, std::string("OMP_NUM_THREADS")));
  EXPECT_EQ(chosen(0, {{"OPENBLAS_NUM_THREADS", "2"}, {"OMP_NUM_THREADS", "3"}}),
            std::pair(3, std::string("OMP_NUM_THREADS")));
  EXPECT_EQ(chosen(0, {{"OPENBLAS_NUM_THREADS", "2"}}),
            std::pair(2, std::string("OPENBLAS_NUM_THREADS")));
  EXPECT_EQ(chosen(3, {{"OMP_NUM_THREADS", "1"}}), std::pair(3, std::string("--threads")));
  // Unset in all but name: the share.
  for (const char* value : {"", "0", "-2", "many", "2x"})
    EXPECT_EQ(chosen(0, {{"OMP_NUM_THREADS", value}}), std::pair(8, std::string())) << value;
}

TEST(ThreadsPerRank, DisjointSetsAreEachRanksOwn) {
  // srun --cpus-per-task 4: each task gets its own four CPUs.
  const std::vector<CpuMask> node = {range(0, 3), range(4, 7), range(8, 11)};
  for (const CpuMask& mine : node)
    EXPECT_EQ(threadsForMask(mine, node), 4);
}

// Note [Finding a contended CPU]: what a rank's own job leaves its
// training thread, from the ranks sharing its CPUs and their threads.
TEST(ExpectedCpuShare, OnlyTheJobsOwnOversubscriptionLowersIt) {
  const std::vector<CpuMask> bound = {cpus({0}), cpus({1})};
  EXPECT_EQ(sharersOf(bound[0], bound), 1);
  const std::vector<CpuMask> crowded(4, range(0, 1));  // np=4 on a 2-core socket
  EXPECT_EQ(sharersOf(crowded[0], crowded), 4);
  const auto expected = [](int allowed, int sharers, int threads) {
    CpuShare share;
    share.allowed = allowed;
    share.sharers = sharers;
    return expectedCpuShare(share, threads);
  };
  EXPECT_DOUBLE_EQ(expected(1, 1, 1), 1.0);   // bound to its own core
  EXPECT_DOUBLE_EQ(expected(2, 4, 1), 0.5);   // four ranks on two cores
  EXPECT_DOUBLE_EQ(expected(1, 1, 4), 0.25);  // --threads 4 on one core
  EXPECT_DOUBLE_EQ(expected(32, 4, 8), 1.0);  // four ranks of 8 threads on a 32-core socket
  EXPECT_DOUBLE_EQ(expected(16, 3, 5), 1.0);  // 15 threads on 16 CPUs
}

TEST(RunQueueTimes, ASpinningThreadRuns) {
  const auto start = std::chrono::steady_clock::now();
  const auto before = threadRunQueueTimes();
  if (!before) GTEST_SKIP() << "no /proc/thread-self/schedstat in this kernel";
  const auto until = start + std::chrono::milliseconds(100);
  volatile unsigned long spins = 0;
  while (std::chrono::steady_clock::now() < until)
    spins = spins + 1;
  const auto after = threadRunQueueTimes();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(after);
  // Spinning, the thread is always ready to run: on a CPU or waiting for one,
  // for the 100 ms. The kernel brings a running thread's figures up to date
  // at each tick (up to 10 ms late at HZ=100), so either end may lag by one,
  // and a VM's vCPU taken by its host (steal) counts as neither: a fresh-check
  // on a busy host measured 79.5 ms. Half the time still tells the figures'
  // unit (seconds, not nanoseconds or ticks) and fields apart.
  const double ready = (after->running - before->running) + (after->waiting - before->waiting);
  EXPECT_GE(ready, 0.05);
  EXPECT_LE(ready, wall + 0.02);
  EXPECT_GT(after->running - before->running, 0.0);
}

// Each rank bound to one CPU; the node's ranks use `usable` of `available`.
CpuShare boundToOneCpu(int usable, int available) {
  CpuShare share;
  share.allowed = 1;
  share.nodeUsable = usable;
  share.nodeAvailable = available;
  return share;
}

TEST(IdleCpus, NoWarningWhenTheRanksMayUseEveryCpu) {
  EXPECT_FALSE(idleCpuWarning(boundToOneCpu(2, 2), 1, 2, Launcher::kMpirun));
}

TEST(IdleCpus, MpirunsCoreBindingIsNamedWithTheOptionThatFixesIt) {
  // mpirun -np 2 on a 64-core node.
  const auto warning = idleCpuWarning(boundToOneCpu(2, 64), 1, 2, Launcher::kMpirun);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("2 ranks on this node may run on 2 of its 64 CPUs: 62 stay idle"),
            std::string::npos)
      << *warning;
  EXPECT_NE(warning->find("1 compute thread "), std::string::npos) << *warning;
  EXPECT_NE(warning->find("--bind-to none"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("PE=32) gives each rank 32"), std::string::npos) << *warning;
}

// Note [CPU quotas]: a container of 4 CPUs' quota on a 64-CPU node, its 2
// ranks bound to a core each by mpirun, leaves 2 CPUs' worth unused; the 60
// CPUs the quota gives no time are not idle.
TEST(IdleCpus, AQuotaBoundsWhatIsIdle) {
  CpuShare share = boundToOneCpu(2, 64);
  applyQuota(share, 4.0, 2);
  const auto warning = idleCpuWarning(share, 1, 2, Launcher::kMpirun);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("2 ranks on this node may run on 2 of the 4 CPUs its CPU quota allows: 2 "
                          "stay idle"),
            std::string::npos)
      << *warning;
  EXPECT_NE(warning->find("PE=2) gives each rank 2"), std::string::npos) << *warning;
  applyQuota(share, 2.0, 2);
  EXPECT_FALSE(idleCpuWarning(share, 1, 2, Launcher::kMpirun));
}

TEST(IdleCpus, SrunGetsItsOwnAdvice) {
  const auto warning = idleCpuWarning(boundToOneCpu(4, 16), 1, 4, Launcher::kSrun);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("srun --cpus-per-task 4"), std::string::npos) << *warning;
}

TEST(ThreadsPerRank, MoreThreadsThanAllowedCpusAreWarnedAbout) {
  CpuShare share;
  share.allowed = 1;
  EXPECT_FALSE(threadsWarning(1, share));
  const auto warning = threadsWarning(4, share);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("--threads 4, but this rank may run on 1 CPU:"), std::string::npos)
      << *warning;
  share.allowed = 8;
  EXPECT_FALSE(threadsWarning(8, share));
}

// Note [CPU quotas]: OMP_NUM_THREADS=8 in a container of 4 CPUs with 2 ranks.
TEST(ThreadsPerRank, MoreThreadsThanTheQuotasShareAreWarnedAbout) {
  CpuShare share;
  share.allowed = 64;
  applyQuota(share, 4.0, 2);
  EXPECT_FALSE(threadsWarning(2, share));
  const auto warning = threadsWarning(8, share);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("--threads 8, but this rank's share of its cgroup's CPU quota (4 CPUs "
                          "over 2 ranks) is 2 CPUs:"),
            std::string::npos)
      << *warning;
  // Bound to one CPU as well: the mask's warning, the tighter.
  share.allowed = 1;
  const auto bound = threadsWarning(8, share);
  ASSERT_TRUE(bound);
  EXPECT_NE(bound->find("may run on 1 CPU:"), std::string::npos) << *bound;
}

// The environments srun gives a task, as Slurm 22.05 sets them (checked on
// the test cluster of tests/e2e/slurm.sh).
TEST(SrunWithoutPmi, IsAnErrorOnlyForSrunTasksThatCannotJoin) {
  const Environment none = {
      {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}};
  const auto error = srunWithoutPmiError(lookup(none));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->rfind("srun started 2 tasks without a process-management interface", 0), 0u)
      << *error;
  EXPECT_NE(error->find("srun --mpi=pmix"), std::string::npos) << *error;

  Environment pmix = none;
  pmix["PMIX_RANK"] = "1";
  EXPECT_FALSE(srunWithoutPmiError(lookup(pmix)));
  Environment pmi2 = none;  // Open MPI built with PMI-2 joins these
  pmi2["PMI_RANK"] = "1";
  EXPECT_FALSE(srunWithoutPmiError(lookup(pmi2)));
  Environment mpirun = none;  // mpirun inside an srun step
  mpirun["OMPI_COMM_WORLD_RANK"] = "0";
  EXPECT_FALSE(srunWithoutPmiError(lookup(mpirun)));
  // An sbatch script's own shell (no step) runs ddp_train as a singleton.
  EXPECT_FALSE(srunWithoutPmiError(lookup({{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "7"}})));
  EXPECT_FALSE(srunWithoutPmiError(lookup({})));
}

}  // namespace
}  // namespace ddp::launcher
