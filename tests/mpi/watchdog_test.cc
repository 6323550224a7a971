// The watchdog between real processes: status servers on TCP, asked while a
// rank is away from the collective the others wait in; and the non-finite
// flag the MPI backend computes while reducing.
#include "comm/watchdog.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/bfloat16.h"
#include "comm/reducer.h"
#include "forwarding_comm.h"
#include "runtime/error.h"
#include "runtime/heartbeat.h"
#include "test_comm.h"

// Not inlined, and exported (the executable is linked with
// --export-dynamic): the frame a captured stack must name.
extern "C" __attribute__((noinline)) void ddpTestQuietSleep(int milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  asm volatile("");  // keeps the frame: no tail call
}

namespace ddp::comm {
namespace {

using namespace std::chrono_literals;

// What a watchdog's handler was given: the checker thread adds while the
// test thread counts; the list itself is read once the watchdog is gone.
class Reports {
 public:
  Watchdog::Handler handler() {
    return [this](const Diagnosis& d) {
      std::lock_guard lock(mutex_);
      list_.push_back(d);
    };
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return list_.size();
  }
  const std::vector<Diagnosis>& list() const { return list_; }

 private:
  mutable std::mutex mutex_;
  std::vector<Diagnosis> list_;
};

// Every rank stays out of collectives past quietAfter: nothing is reported
// before the check is armed, nor while a new context or a heartbeat marks
// progress; then
// the lowest rank reports once, with each rank's thread and stack, and the
// others leave it to that rank (Note [Where a stuck rank is]), each having
// asked the rank below it alone: 2n - 2 status requests in all, where asking
// every peer made n^2 - 1.
TEST(Watchdog, RanksOutOfCollectivesTooLongAreReportedByTheLowest) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.quietAfter = 1s;
  Reports reports;
  std::size_t answered = 0;
  {
    Watchdog watchdog(*comm, "host-" + std::to_string(r), options, reports.handler());
    ddpTestQuietSleep(1500);  // not armed yet: nothing reported
    EXPECT_EQ(reports.count(), 0u);
    watchdog.armQuietCheck();
    for (int batch = 1; batch <= 3; ++batch) {  // progress without collectives
      comm->setContext(str("evaluation, batch ", batch, " of 3"));
      ddpTestQuietSleep(600);
    }
    EXPECT_EQ(reports.count(), 0u);  // 1.8 s out of collectives, but never 1 s without progress
    for (int chunk = 1; chunk <= 3; ++chunk) {  // Note [Heartbeats of local work]: a slow load
      heartbeat();
      ddpTestQuietSleep(600);
    }
    EXPECT_EQ(reports.count(), 0u);  // the same context for 1.8 s, but heartbeats
    comm->setContext("step 9");
    ddpTestQuietSleep(1500);  // the report comes within about 0.5 s
    answered = watchdog.statusRequestsAnswered();
  }
  // Rank j is asked by rank 0's report (j > 0) and by rank j + 1.
  EXPECT_EQ(answered, std::size_t{r > 0} + std::size_t{r + 1 < n}) << "rank " << r << " of " << n;
  comm->allreduce(std::span<float>(std::vector<float>(1).data(), 1), ReduceOp::kSum)->wait(60s);
  if (r != 0) {
    EXPECT_TRUE(reports.list().empty()) << reports.list().front().report;
    return;
  }
  ASSERT_EQ(reports.list().size(), 1u);
  const Diagnosis& d = reports.list().front();
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kOutsideCollectives);
  EXPECT_EQ(static_cast<int>(d.culprits.size()), n) << d.report;
  EXPECT_EQ(d.report.rfind("rank 0 (host-0) has made no progress for ", 0), 0u) << d.report;
  EXPECT_NE(d.report.find("now at step 9: its training thread is asleep"), std::string::npos)
      << d.report;
  if (n > 1) {
    EXPECT_NE(d.report.find("the other ranks: rank 1 (host-1) is not in any collective"),
              std::string::npos)
        << d.report;
  }
  int stacks = 0, named = 0;
  for (const std::string& line : d.details) {
    stacks += line.rfind("stack of rank ", 0) == 0;
    named += line.find("ddpTestQuietSleep (watchdog_mpi_test)") != std::string::npos;
  }
  EXPECT_EQ(stacks, n);
  EXPECT_EQ(named, n) << d.details.size();
}

// Every rank stalls at once and rank 0, having reported, exits before rank 1
// asks: rank 1 leaves it the few seconds a report from a lower rank gets
// (mpirun is stopping the job), then reports itself when the job goes on,
// naming rank 0 as gone. Rank 0's status server closing stands in for its
// exit.
TEST(Watchdog, ALowerRankThatHasExitedIsLeftToEndTheJob) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no lower rank to leave it to";
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.quietAfter = 1s;
  Reports reports;
  {
    Watchdog watchdog(*comm, "host-" + std::to_string(r), options, reports.handler());
    if (r != 0) {
      watchdog.armQuietCheck();
      comm->setContext("step 9");
      // Without the deferral rank 1 reports about 1.25 s in.
      ddpTestQuietSleep(3000);
      EXPECT_EQ(reports.count(), 0u);
      // After the deferral (20 checks of 250 ms) it reports: the job went on.
      for (int i = 0; i < 60 && reports.count() == 0; ++i)
        ddpTestQuietSleep(100);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) {
    EXPECT_TRUE(reports.list().empty()) << reports.list().front().report;
    return;
  }
  if (r > 1) {  // these left it to rank 1 (quiet, answering) as long: they may report too
    EXPECT_LE(reports.list().size(), 1u);
    return;
  }
  ASSERT_EQ(reports.list().size(), 1u);
  const Diagnosis& d = reports.list().front();
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kOutsideCollectives) << d.report;
  EXPECT_EQ(d.report.rfind("rank 1 (host-1) has made no progress for ", 0), 0u) << d.report;
  EXPECT_NE(d.report.find("not answering: rank 0 (host-0): its status server refused the "
                          "connection: the rank has ended (its process has exited or is ending)"),
            std::string::npos)
      << d.report;
}

// The last rank's watchdog goes (its server closes, standing in for the
// rank's exit) while the others wait in an all-reduce that it joins once
// rank 0's watchdog has reported, or after 10 s. `afterIssue` runs on every
// other rank once it has issued the all-reduce. Returns how long rank 0
// waited for the report.
std::chrono::steady_clock::duration waitOnAnEndedLastRank(
    Communicator& comm, std::optional<Watchdog>& watchdog, const Reports& reports,
    const std::function<void()>& afterIssue = {}) {
  const int last = comm.size() - 1;
  if (comm.rank() == last) watchdog.reset();
  MPI_Barrier(MPI_COMM_WORLD);  // its server has closed
  std::vector<float> data(16, 1.0f);
  if (comm.rank() == last) {
    MPI_Barrier(MPI_COMM_WORLD);
    comm.allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
    return {};
  }
  const auto start = std::chrono::steady_clock::now();
  WorkPtr work = comm.allreduce(std::span<float>(data), ReduceOp::kSum);
  if (afterIssue) afterIssue();
  // The other ranks wait in the barrier, their all-reduce pending.
  while (comm.rank() == 0 && reports.count() == 0 && std::chrono::steady_clock::now() < start + 10s)
    std::this_thread::sleep_for(20ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  MPI_Barrier(MPI_COMM_WORLD);  // the last rank joins now
  work->wait(60s);
  return waited;
}

// Rank 0's one report, which must name the last rank as ended; none
// elsewhere (nullopt).
std::optional<Diagnosis> reportOfTheEndedLastRank(const Reports& reports, int n, int r) {
  if (r != 0) {
    EXPECT_TRUE(reports.list().empty()) << reports.list().front().report;
    return std::nullopt;
  }
  EXPECT_EQ(reports.list().size(), 1u);
  if (reports.list().empty()) return std::nullopt;
  const Diagnosis& d = reports.list().front();
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kPeerEnded) << d.report;
  EXPECT_EQ(d.culprits, std::vector<int>{n - 1}) << d.report;
  return d;
}

// Note [A peer that has ended]: a peer whose status server has closed
// without its saying why may have ended the job itself, the launcher
// stopping the rest: the ranks waiting for it leave the launcher 5 s, then
// the lowest reports it and ends the job.
TEST(Watchdog, APeerEndedWithoutSayingWhyIsLeftToTheLauncherFirst) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no peer to end";
  WatchdogOptions options;
  options.stallAfter = 300ms;
  Reports reports;
  std::chrono::steady_clock::duration waited{};
  {
    std::optional<Watchdog> watchdog(std::in_place, *comm, "host-" + std::to_string(r), options,
                                     reports.handler());
    waited = waitOnAnEndedLastRank(*comm, watchdog, reports);
  }
  if (!reportOfTheEndedLastRank(reports, n, r)) return;
  EXPECT_GE(waited, 5s) << "reported before the launcher's time";
  EXPECT_LT(waited, 8s);
}

// Note [A stop asked for while a peer has ended]: once a stop has been
// asked for, a peer that has ended is looked for after leftPeerGrace, not
// stallAfter (an hour here), and the launcher is left 2 s from the stop,
// not 5 s from then; the lowest rank waiting reports it, and says why the
// stop cannot happen.
TEST(Watchdog, APeerEndedWhileAStopIsAskedForEndsTheJobSoon) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no peer to end";
  std::atomic<bool> stopAsked{false};
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.leftPeerGrace = 500ms;
  options.stopRequested = [&stopAsked] { return stopAsked.load(); };
  Reports reports;
  std::chrono::steady_clock::duration waited{};
  {
    std::optional<Watchdog> watchdog(std::in_place, *comm, "host-" + std::to_string(r), options,
                                     reports.handler());
    waited = waitOnAnEndedLastRank(*comm, watchdog, reports, [&stopAsked] {
      std::this_thread::sleep_for(200ms);
      stopAsked = true;  // SIGTERM, from a launcher that gives a long grace
    });
  }
  const std::optional<Diagnosis> d = reportOfTheEndedLastRank(reports, n, r);
  if (!d) return;
  EXPECT_NE(d->report.find("; the stop asked for needs every rank, so the job ends here instead"),
            std::string::npos)
      << d->report;
  EXPECT_GE(waited, 2200ms) << "reported before the launcher's time since the stop";
  EXPECT_LT(waited, 4s) << "the stop did not shorten the wait";
}

// The same Note, a stop asked for before anything is wrong: a peer late to
// a collective (alive: a checkpoint's write, say) is asked about once and
// left be; one that has ended by the next collective is found there and
// left the launcher 1 s from when it was found.
TEST(Watchdog, AfterAStopALatePeerIsLeftBeAndOneThatEndedIsReported) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no peer to be late";
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.leftPeerGrace = 500ms;
  options.stopRequested = [] { return true; };
  Reports reports;
  std::size_t reportsWhileLate = 0;
  std::chrono::steady_clock::duration waited{};
  {
    std::optional<Watchdog> watchdog(std::in_place, *comm, "host-" + std::to_string(r), options,
                                     reports.handler());
    std::vector<float> data(16, 1.0f);
    if (r == n - 1) std::this_thread::sleep_for(1500ms);
    comm->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
    reportsWhileLate = reports.count();
    waited = waitOnAnEndedLastRank(*comm, watchdog, reports);
  }
  EXPECT_EQ(reportsWhileLate, 0u) << reports.list().front().report;
  if (!reportOfTheEndedLastRank(reports, n, r)) return;
  EXPECT_GE(waited, 1500ms) << "reported before the grace and the launcher's second";
  EXPECT_LT(waited, 4s);
}

// A collective pending past quietAfter whose issuing thread never raises the
// timeout (held elsewhere: inside an NCCL call that blocks, say) ends the
// job from the checker, with the training thread's stack; the late rank,
// making progress, reports nothing. Where a thread asked for stacks (it
// raised the timeout and ends the job itself), the checker leaves it be.
TEST(Watchdog, ACollectiveNobodyRaisesPastItsTimeoutEndsTheJob) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: its collectives complete at once";
  const int late = n - 1;
  for (const bool raisedElsewhere : {false, true}) {
    WatchdogOptions options;
    options.stallAfter = std::chrono::hours(1);
    options.quietAfter = 1s;
    Reports reports;
    std::vector<float> data(64, 1.0f);
    {
      Watchdog watchdog(*comm, "host-" + std::to_string(r), options, reports.handler());
      watchdog.armQuietCheck();
      WorkPtr work;
      if (r != late) {
        comm->setContext("step 4");
        work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
        if (raisedElsewhere) (void)watchdog.diagnose(/*withStacks=*/true);
        ddpTestQuietSleep(2500);  // never waits for it
      } else {
        for (int batch = 1; batch <= 10; ++batch) {  // progress, out of collectives
          comm->setContext(str("evaluation, batch ", batch));
          ddpTestQuietSleep(250);
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (r == late) work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
      work->wait(60s);
    }
    for (float v : data)
      ASSERT_EQ(v, static_cast<float>(n));
    if (r == late || raisedElsewhere) {
      EXPECT_TRUE(reports.list().empty()) << reports.list().front().report;
      continue;
    }
    ASSERT_EQ(reports.list().size(), 1u);
    const Diagnosis& d = reports.list().front();
    EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived) << d.report;
    EXPECT_EQ(d.culprits, std::vector<int>{late}) << d.report;
    EXPECT_EQ(d.report.rfind(str("rank ", r, " (host-", r, ") waits in mpi allreduce"), 0), 0u)
        << d.report;
    EXPECT_NE(d.report.find("(step 4)"), std::string::npos) << d.report;
    EXPECT_NE(d.report.find(str("rank ", late, " (host-", late, ") is not in any collective for ")),
              std::string::npos)
        << d.report;
    EXPECT_NE(d.report.find(", now at evaluation, batch "), std::string::npos) << d.report;
    EXPECT_NE(d.report.find("No thread of this rank has raised --timeout for it (its training "
                            "thread is asleep"),
              std::string::npos)
        << d.report;
    ASSERT_FALSE(d.details.empty());
    EXPECT_EQ(d.details.front(),
              str("stack of rank ", r, " (host-", r, ")'s training thread, innermost first:"));
    EXPECT_TRUE(std::any_of(d.details.begin(), d.details.end(), [](const std::string& line) {
      return line.find("ddpTestQuietSleep (watchdog_mpi_test)") != std::string::npos;
    }));
  }
}

TEST(Watchdog, NamesTheRankThatHasNotArrived) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);  // only the explicit diagnose() below
  Watchdog watchdog(*comm, "host-" + std::to_string(r), options, nullptr);
  std::vector<float> data(256, 1.0f);
  const int late = n - 1;
  comm->setContext("step 3");
  if (r != late) {
    WorkPtr work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
    std::this_thread::sleep_for(200ms);  // it is pending now
    const Diagnosis d = watchdog.diagnose();
    if (n == 1) {
      EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNothingPending);
    } else {
      EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived) << d.report;
      EXPECT_EQ(d.culprits, std::vector<int>{late}) << d.report;
      EXPECT_NE(d.report.find(str("rank ", late, " (host-", late, ") is not in any collective")),
                std::string::npos)
          << d.report;
      EXPECT_NE(d.report.find("(step 3)"), std::string::npos) << d.report;
      std::vector<int> waiting;  // every other rank but the late one
      for (int peer = 0; peer < late; ++peer)
        if (peer != r) waiting.push_back(peer);
      EXPECT_EQ(d.alsoWaiting, waiting) << d.report;
    }
    MPI_Barrier(MPI_COMM_WORLD);  // now the late rank joins
    work->wait(60s);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    comm->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
  }
  for (float v : data)
    ASSERT_EQ(v, static_cast<float>(n));
  // Nothing pending afterwards.
  EXPECT_EQ(watchdog.diagnose().verdict, Diagnosis::Verdict::kNothingPending);
}

// Note [Watchdog reports]: at the stall check only the lowest rank waiting
// asks every peer; each other waiting rank asks the ranks below it until
// one waits in the same collective. With the last rank late, rank 0 asks
// the n - 1 others and rank k (0 < k < n - 1) asks rank k - 1 alone:
// 2n - 3 status requests in all, where every waiting rank asking every peer
// made (n - 1)^2.
TEST(Watchdog, AStallIsLeftToTheLowestRankWaitingInIt) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: its collectives complete at once";
  WatchdogOptions options;
  options.stallAfter = 300ms;
  Reports reports;
  std::size_t answered = 0;
  {
    Watchdog watchdog(*comm, "host-" + std::to_string(r), options, reports.handler());
    std::vector<float> data(16, 1.0f);
    const int late = n - 1;
    comm->setContext("step 7");
    if (r != late) {
      WorkPtr work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
      std::this_thread::sleep_for(1500ms);  // the checks come 300 to 550 ms in
      MPI_Barrier(MPI_COMM_WORLD);
      work->wait(60s);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      comm->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
    }
    answered = watchdog.statusRequestsAnswered();
  }
  EXPECT_EQ(reports.count(), 0u) << reports.list().front().report;  // a stall, no desync
  // Rank j is asked by rank 0 (j > 0) and by rank j + 1 (when that one
  // waits and is not rank 0's only peer).
  const std::size_t expected = (r > 0 ? 1 : 0) + (r + 1 < n - 1 ? 1 : 0);
  EXPECT_EQ(answered, expected) << "rank " << r << " of " << n;
  unsigned long long total = answered;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, static_cast<unsigned long long>(2 * n - 3));
}

// Note [One report of a timeout]: rank `late` joins an all-reduce only after
// every other rank's wait for it has timed out (0.5 s) and the rank has
// asked lowerRankReportingTimeout, then stayed on past quietAfter. Returns
// each rank's answer (nullopt on the late rank) and the status requests it
// answered.
struct TimeoutOutcome {
  std::optional<TimeoutDeferral> deferral;
  std::size_t answered = 0;
};
TimeoutOutcome timeOutWaitingFor(Communicator& comm, int late, const WatchdogOptions& options,
                                 Reports& reports) {
  const int r = comm.rank();
  TimeoutOutcome outcome;
  Watchdog watchdog(comm, "host-" + std::to_string(r), options, reports.handler());
  // Not on the late rank, out of collectives past quietAfter meanwhile.
  if (r != late) watchdog.armQuietCheck();
  std::vector<float> data(16, 1.0f);
  if (r == late) {
    MPI_Barrier(MPI_COMM_WORLD);
    comm.allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
  } else {
    const auto start = std::chrono::steady_clock::now();
    WorkPtr work = comm.allreduce(std::span<float>(data), ReduceOp::kSum);
    EXPECT_THROW(work->wait(500ms), CommTimeoutError);
    outcome.deferral = watchdog.lowerRankReportingTimeout(500ms);
    // Past quietAfter: the checker's overdue check would end the job here,
    // but the thread that raised the timeout has it in hand.
    std::this_thread::sleep_until(start + options.quietAfter + 700ms);
    MPI_Barrier(MPI_COMM_WORLD);
    work->wait(60s);
  }
  outcome.answered = watchdog.statusRequestsAnswered();
  return outcome;
}

// Every rank waiting in a collective when its timeout fires leaves the
// report to the nearest lower rank waiting in it too, passing over one that
// has not arrived, so the lowest rank waiting alone reports: the last rank
// late, rank k > 0 leaves it to rank k - 1; rank 0 late, rank 1 reports and
// rank k > 1 leaves it to rank k - 1. Each asks one rank, and the one passed
// over: n - 2 and n - 1 status requests, besides the report's own. It
// leaves that rank what is left of its timeout (here quietAfter, 1.5 s,
// the later) and the 13 s a report takes with the default probe timeout
// and patience.
TEST(Watchdog, ATimeoutIsLeftToTheLowestRankWaitingInIt) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: its collectives complete at once";
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.quietAfter = 1500ms;
  for (const int late : {n - 1, 0}) {
    Reports reports;
    const TimeoutOutcome outcome = timeOutWaitingFor(*comm, late, options, reports);
    EXPECT_EQ(reports.count(), 0u) << reports.list().front().report;
    const int reporter = late == 0 ? 1 : 0;
    if (r == late || r == reporter) {
      EXPECT_FALSE(outcome.deferral) << "rank " << r << " left it to " << outcome.deferral->rank;
    } else {
      // Not ASSERT: every rank must reach the all-reduce below.
      EXPECT_TRUE(outcome.deferral.has_value()) << "rank " << r << ", rank " << late << " late";
      if (outcome.deferral) {
        EXPECT_EQ(outcome.deferral->rank, r - 1);
        EXPECT_EQ(outcome.deferral->why, "waits in it too and reports it");
        // 1.5 s less the about 0.5 s the lower rank had waited, plus 13 s.
        EXPECT_GE(outcome.deferral->patience, 13s);
        EXPECT_LE(outcome.deferral->patience, 14500ms);
      }
    }
    unsigned long long total = outcome.answered;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(total, static_cast<unsigned long long>(late == 0 ? n - 1 : n - 2)) << "late " << late;
  }
}

// The same Note: rank 0 has reported a timeout and exited (its status server
// closing stands in) before rank 1's wait times out. Rank 1 leaves the
// launcher its 5 s to stop the job instead of reporting a second time, with
// rank 0's end for the cause; a rank above leaves it to rank 1.
TEST(Watchdog, ATimeoutWhoseLowerRankHasEndedIsLeftToTheLauncher) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no lower rank";
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  std::optional<Watchdog> watchdog(std::in_place, *comm, "host-" + std::to_string(r), options,
                                   Watchdog::Handler{});
  if (r == 0) watchdog.reset();
  MPI_Barrier(MPI_COMM_WORLD);  // its server has closed
  std::vector<float> data(16, 1.0f);
  if (r == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    comm->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
    return;
  }
  WorkPtr work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
  EXPECT_THROW(work->wait(300ms), CommTimeoutError);
  const std::optional<TimeoutDeferral> deferral = watchdog->lowerRankReportingTimeout(300ms);
  MPI_Barrier(MPI_COMM_WORLD);
  work->wait(60s);
  ASSERT_TRUE(deferral.has_value());
  EXPECT_EQ(deferral->rank, r - 1);
  if (r == 1) {
    EXPECT_EQ(deferral->patience, 5s);
    EXPECT_EQ(deferral->why.rfind("has ended, perhaps having reported it", 0), 0u) << deferral->why;
  } else {
    EXPECT_GE(deferral->patience, 13s);
  }
}

// The MPI backend with one more channel, whose collectives the test issues
// by hand: a desync without a real mismatched collective, which MPI could
// not recover from.
class SideChannelCommunicator final : public ForwardingCommunicator {
 public:
  explicit SideChannelCommunicator(CommOptions options) : ForwardingCommunicator(options) {}
  std::vector<const ActivityLog*> activityLogs() const override {
    std::vector<const ActivityLog*> logs = ForwardingCommunicator::activityLogs();
    logs.push_back(&side_);
    return logs;
  }
  ActivityLog& side() { return side_; }

 private:
  ActivityLog side_{"side"};
};

// Note [Watchdog reports]: a desync is left to the lowest rank waiting at
// its position, whichever call each waits in. Rank 1 issues a barrier where
// the others issue an all-reduce: rank 0 alone reports it, naming rank 1,
// and ends the job (when every diverged rank did, several MPI_Aborts came
// at once). Rank 0 asks the n - 1 others, every other rank the one below
// it: 2n - 2 status requests.
TEST(Watchdog, ADesyncIsReportedByTheLowestRankWaitingAtItsPosition) {
  CommOptions commOptions;
  commOptions.timeout = 60s;
  SideChannelCommunicator comm(commOptions);
  const int n = comm.size(), r = comm.rank();
  if (n == 1) GTEST_SKIP() << "one rank: nobody to diverge from";
  WatchdogOptions options;
  options.stallAfter = 300ms;
  Reports reports;
  std::size_t answered = 0;
  {
    Watchdog watchdog(comm, "host-" + std::to_string(r), options, reports.handler());
    auto work = std::make_shared<Work>("side #0");
    comm.side().issued(0, r == 1 ? "barrier()" : "allreduce(float32 x 16, sum)", "step 4", work);
    std::this_thread::sleep_for(1500ms);  // the checks come 300 to 550 ms in
    work->complete();
    MPI_Barrier(MPI_COMM_WORLD);  // no rank's watchdog goes while others ask it
    answered = watchdog.statusRequestsAnswered();
  }
  if (r == 0) {
    ASSERT_EQ(reports.count(), 1u);
    const Diagnosis& d = reports.list().front();
    EXPECT_EQ(d.verdict, Diagnosis::Verdict::kDesync) << d.report;
    EXPECT_EQ(d.culprits, std::vector<int>{1}) << d.report;
    EXPECT_NE(d.report.find("rank 1 (host-1) issued barrier() (step 4)"), std::string::npos)
        << d.report;
  } else {
    EXPECT_EQ(reports.count(), 0u) << reports.list().front().report;
  }
  const std::size_t expected = (r > 0 ? 1 : 0) + (r + 1 < n ? 1 : 0);
  EXPECT_EQ(answered, expected) << "rank " << r << " of " << n;
  unsigned long long total = answered;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, static_cast<unsigned long long>(2 * n - 2));
}

// Note [A rank that leaves training alone]: the rank told (rank 0, or rank
// 1 when rank 0 leaves) ends its wait once its collective has waited the
// grace, not stallAfter, naming the rank that left and why; the ranks told
// nothing wait on.
TEST(Watchdog, APeerThatLeavesTrainingIsNamedAfterTheGrace) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: nobody to tell";
  for (const int leaving : {n - 1, 0}) {
    const int told = leaving == 0 ? 1 : 0;
    WatchdogOptions options;
    options.stallAfter = std::chrono::hours(1);
    options.leftPeerGrace = 500ms;
    Reports reports;
    std::vector<float> data(64, 1.0f);
    std::chrono::steady_clock::duration waited{};
    {
      Watchdog watchdog(*comm, "host-" + std::to_string(r), options, reports.handler());
      comm->setContext("step 7");
      WorkPtr work;
      if (r != leaving) {
        const auto start = std::chrono::steady_clock::now();
        work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
        const auto until = start + (r == told ? 10s : 2s);
        while (reports.count() == 0 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(10ms);
        waited = std::chrono::steady_clock::now() - start;
      } else {
        watchdog.announceLeaving("data: bad label 11\nin a batch");
      }
      MPI_Barrier(MPI_COMM_WORLD);  // the told rank has reported
      if (r == leaving) work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
      work->wait(60s);
    }
    for (float v : data)
      ASSERT_EQ(v, static_cast<float>(n));
    if (r != told) {
      EXPECT_TRUE(reports.list().empty()) << reports.list().front().report;
      continue;
    }
    EXPECT_GE(waited, 500ms) << "reported before the grace";
    EXPECT_LT(waited, 5s) << "the grace did not count";
    ASSERT_EQ(reports.list().size(), 1u);
    const Diagnosis& d = reports.list().front();
    EXPECT_EQ(d.verdict, Diagnosis::Verdict::kPeerEnded) << d.report;
    EXPECT_EQ(d.culprits, std::vector<int>{leaving}) << d.report;
    EXPECT_EQ(d.report.rfind(str("rank ", told, " (host-", told, ") waits in mpi allreduce"), 0),
              0u)
        << d.report;
    EXPECT_NE(d.report.find(str(": 1 of ", n - 1, " peers have not arrived; left training: rank ",
                                leaving, " (host-", leaving,
                                "), failing with: data: bad label 11 in a batch; ")),
              std::string::npos)
        << d.report;
  }
}

// Note [Telling rank 0 that the job ends] and Note [One rank ends the job]:
// the first rank to end the job reaches rank 0's handler, as one line, and
// waits until the handler has returned, held no longer than the probe
// timeout plus the patience by a handler that takes too long; every later
// one, rank 0 included, is told that rank, and the handler does not run
// again.
TEST(Watchdog, RankZeroRecordsTheFirstRankToEndTheJobAndNamesItToTheOthers) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.probeTimeout = 500ms;
  options.endingPatience = 1s;
  std::mutex mutex;
  std::vector<std::string> told;  // rank 0's
  Watchdog watchdog(*comm, "host-" + std::to_string(r), options, nullptr,
                    [&](const std::string& why) {
                      {
                        std::lock_guard lock(mutex);
                        told.push_back(why);
                      }
                      std::this_thread::sleep_for(2500ms);  // a write that hangs
                    });
  // The last rank first, alone: held by the handler's write.
  const int firstRank = n - 1;
  if (r == firstRank) {
    const auto start = std::chrono::steady_clock::now();
    const std::optional<std::string> before =
        watchdog.announceEnding(str("rank ", r, " ends the job\nbecause"));
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(before, std::nullopt) << "the first to end the job was told of another";
    if (n > 1) {
      EXPECT_GE(waited, 1s) << "returned before the patience";
      EXPECT_LT(waited, 2400ms) << "held past the probe timeout and the patience";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Then every other rank at once: each is told the first, at once; the
  // first, asking again (as it does at its next address when one did not
  // answer), is told it is the first, and its why is not recorded twice.
  const auto start = std::chrono::steady_clock::now();
  const std::optional<std::string> before = watchdog.announceEnding(str("rank ", r, " too"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << "a later claim waited";
  if (r == firstRank) {
    EXPECT_EQ(before, std::nullopt);
  } else {
    EXPECT_EQ(before, str("rank ", firstRank, " (host-", firstRank,
                          ") ended the job first, and reports it"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) {
    std::lock_guard lock(mutex);
    EXPECT_EQ(told, std::vector<std::string>{str("rank ", firstRank, " ends the job because")});
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the watchdogs stop together (rank 0's handler may still sleep)
}

// Note [One rank ends the job]: a rank that has reported stops serving
// before it aborts, and a claim that rank 0 refuses so is left to the
// launcher, which ends the job on rank 0's exit, even by a rank that found
// rank 0 "ended" meanwhile; not so when rank 0 said it left training (it
// waits in MPI_Finalize, the launcher ends nothing), nor when rank 0's end
// is why this rank ends the job, after leaving it to the launcher already
// (here: a timeout left to rank 0, found ended).
TEST(Watchdog, AClaimThatAnEndingRankZeroRefusesIsLeftToTheLauncher) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: nobody else claims";
  WatchdogOptions options;
  options.stallAfter = std::chrono::hours(1);
  options.probeTimeout = 500ms;
  const std::string exited = "rank 0 (host-0) has exited, and the launcher ends the job";
  for (const bool rankZeroLeft : {true, false}) {
    Watchdog watchdog(*comm, "host-" + std::to_string(r), options, nullptr);
    if (r == 0) {
      if (rankZeroLeft) watchdog.announceLeaving("data: bad label 11");  // to rank 1
      const auto start = std::chrono::steady_clock::now();
      watchdog.stopServing();
      EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 1) {
      const auto start = std::chrono::steady_clock::now();
      const std::optional<std::string> elsewhere = watchdog.announceEnding("out of memory");
      EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << "refused at once";
      EXPECT_EQ(elsewhere, rankZeroLeft ? std::nullopt : std::optional(exited));
    }
    if (rankZeroLeft) {
      MPI_Barrier(MPI_COMM_WORLD);
      continue;
    }
    std::vector<float> data(16, 1.0f);
    if (r == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      comm->allreduce(std::span<float>(data), ReduceOp::kSum)->wait(60s);
      continue;
    }
    WorkPtr work = comm->allreduce(std::span<float>(data), ReduceOp::kSum);
    if (r == 1) {
      const Diagnosis found = watchdog.diagnose();
      EXPECT_NE(found.report.find("rank 0 (host-0)"), std::string::npos) << found.report;
      EXPECT_EQ(watchdog.announceEnding("out of memory"), exited)
          << "rank 0 found ended is not yet the launcher's time";
      EXPECT_THROW(work->wait(300ms), CommTimeoutError);
      const std::optional<TimeoutDeferral> deferral = watchdog.lowerRankReportingTimeout(300ms);
      ASSERT_TRUE(deferral.has_value());
      EXPECT_EQ(deferral->rank, 0);
      EXPECT_EQ(watchdog.announceEnding("a collective timed out"), std::nullopt)
          << "rank 0's end, left to the launcher once, is left to it again";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    work->wait(60s);
  }
}

// Shared memory (from allocate()) or plain memory (MPI_Allreduce).
class NonFiniteFlag : public ::testing::TestWithParam<bool> {};

TEST_P(NonFiniteFlag, EveryRankLearnsThatSomeRankContributedANaN) {
  auto comm = makeTestComm(60s, /*checkNonFinite=*/true);
  const int n = comm->size(), r = comm->rank();
  const std::size_t count = 100000;
  std::vector<float> plain(count);
  auto shared = comm->allocate(count * sizeof(float));
  float* data = GetParam() ? static_cast<float*>(shared.get()) : plain.data();
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>(r);
    // Round 1: the last rank's last element is NaN; round 2: a sum overflows to infinity.
    if (round == 1 && r == n - 1) data[count - 1] = std::numeric_limits<float>::quiet_NaN();
    if (round == 2) data[count / 2] = std::numeric_limits<float>::max();
    WorkPtr work = comm->allreduce(data, count, DataType::kFloat32, ReduceOp::kSum);
    work->wait(60s);
    ASSERT_TRUE(work->resultChecks().nonFinite.has_value());
    const bool expected = round == 1 || (round == 2 && n > 1);
    EXPECT_EQ(*work->resultChecks().nonFinite, expected) << "round " << round;
  }
  // Without checkNonFinite only the shared-memory path reports (at no cost).
  auto unchecked = makeTestComm();
  std::vector<float> values(16, 1.0f);
  WorkPtr quiet = unchecked->allreduce(std::span<float>(values), ReduceOp::kSum);
  quiet->wait(60s);
  EXPECT_FALSE(quiet->resultChecks().nonFinite.has_value());
  // Integers carry no such check.
  std::vector<std::int32_t> ints(8, 1);
  WorkPtr work = comm->allreduce(std::span<std::int32_t>(ints), ReduceOp::kSum);
  work->wait(60s);
  EXPECT_FALSE(work->resultChecks().nonFinite.has_value());
}

TEST(NonFiniteFlag, BFloat16OnSharedMemoryIsCheckedAfterRounding) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  if (n == 1) GTEST_SKIP() << "one rank: no shared-memory path";
  const std::size_t count = 5000;
  auto shared = comm->allocate(count * sizeof(std::uint16_t));
  auto* data = static_cast<std::uint16_t*>(shared.get());
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < count; ++i)
      data[i] = toBFloat16(1.0f);
    if (round == 1 && r == n - 1) data[count - 1] = toBFloat16(std::nanf(""));
    WorkPtr work = comm->allreduce(data, count, DataType::kBFloat16, ReduceOp::kSum);
    work->wait(60s);
    ASSERT_TRUE(work->resultChecks().nonFinite.has_value());
    EXPECT_EQ(*work->resultChecks().nonFinite, round == 1) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Memory, NonFiniteFlag, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "shared" : "plain"; });

TEST(Reducer, FirstNonFiniteNamesTheFirstParameterInRegistrationOrder) {
  auto comm = makeTestComm();
  const int n = comm->size(), r = comm->rank();
  Reducer reducer(*comm, {{"a", 5000}, {"b", 300}, {"c", 70000}},
                  {4096, 4096, false, GradCompression::kNone, {}});
  for (int round = 0; round < 2; ++round) {
    reducer.prepareForBackward(true);
    for (std::size_t g = 3; g-- > 0;) {
      for (float& v : reducer.gradient(g))
        v = 1.0f;
      // Round 1: the last rank's "b" and "c" get a NaN; "b" is reported.
      if (round == 1 && r == n - 1 && g >= 1) reducer.gradient(g)[7] = std::nanf("");
      reducer.markReady(g);
    }
    reducer.finalize();
    const std::optional<std::size_t> bad = reducer.firstNonFinite();
    if (round == 0) {
      EXPECT_FALSE(bad.has_value());
    } else {
      ASSERT_TRUE(bad.has_value());
      EXPECT_EQ(*bad, 1u);
    }
  }
}

}  // namespace
}  // namespace ddp::comm
