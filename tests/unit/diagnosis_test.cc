// The watchdog's reasoning (Note [Watchdog reports]) on hand-made statuses,
// and its wire format.
#include "comm/diagnosis.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "runtime/error.h"
#include "runtime/heartbeat.h"

namespace ddp::comm {
namespace {

const std::string kAllreduce = "allreduce(float32 x 1024, sum)";

// A rank whose "mpi" channel issued `issued` collectives, the oldest pending
// being #pending (what), or none.
RankStatus rank(int r, std::uint64_t issued, std::optional<std::uint64_t> pending = std::nullopt,
                const std::string& what = kAllreduce) {
  RankStatus s;
  s.rank = r;
  s.host = r < 2 ? "node-a" : "node-b";
  s.pid = 1000 + r;
  ChannelActivity c;
  c.channel = "mpi";
  c.issued = issued;
  c.context = "step 12";
  c.idleSeconds = pending ? 0.0 : 3.5;
  c.contextSeconds = pending ? 0.0 : 3.5;
  if (pending) c.oldestPending = PendingCollective{*pending, what, "step 12, bucket 1 of 2", 4.0};
  s.channels.push_back(c);
  return s;
}

PeerAnswer answer(const RankStatus& status) {
  return PeerAnswer{status.rank, status.host, true, "", status};
}

TEST(WatchdogDiagnosis, APeerThatHasNotIssuedTheCollectiveHasNotArrived) {
  const Diagnosis d = diagnose(
      rank(0, 43, 42), {answer(rank(1, 43, 42)), answer(rank(2, 42)), answer(rank(3, 44, 43))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived);
  EXPECT_EQ(d.culprits, std::vector<int>{2});
  EXPECT_EQ(d.sequence, 42u);
  EXPECT_NE(d.report.find("1 of 3 peers have not arrived: rank 2 (node-b) is not in any "
                          "collective (computing or stalled) for 3.5 s, now at step 12 (its "
                          "last mpi collective: #41)"),
            std::string::npos)
      << d.report;
  EXPECT_NE(d.report.find("; 2 have arrived"), std::string::npos) << d.report;  // rank 3 is past it
  EXPECT_EQ(d.alsoWaiting, std::vector<int>{1});  // rank 3 no longer waits
}

TEST(WatchdogDiagnosis, ADifferentCollectiveAtTheSamePositionIsADesync) {
  const Diagnosis d =
      diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42, "barrier")), answer(rank(2, 42))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kDesync);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.report.find("desync"), std::string::npos);
  EXPECT_NE(d.report.find("rank 1 (node-a) issued barrier"), std::string::npos) << d.report;
}

TEST(WatchdogDiagnosis, APeerThatDoesNotAnswerIsNamedWithTheReason) {
  PeerAnswer silent{3, "node-b", false, "no answer within 2.0 s", {}};
  const Diagnosis d = diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42)), silent});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived);
  EXPECT_EQ(d.culprits, std::vector<int>{3});
  EXPECT_NE(d.report.find("not answering: rank 3 (node-b): no answer within 2.0 s"),
            std::string::npos)
      << d.report;
}

// Note [A peer that has ended]: it will never arrive, so the stall check
// ends the job; a peer that is only silent may come back.
TEST(WatchdogDiagnosis, APeerThatHasEndedWillNeverArrive) {
  PeerAnswer gone{2,
                  "node-b",
                  false,
                  "its status server refused the connection: the rank has ended (its process has "
                  "exited or is ending)",
                  {},
                  true};
  PeerAnswer silent{3, "node-b", false, "no answer within 2.0 s", {}};
  Diagnosis d = diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42)), gone, silent});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kPeerEnded);
  EXPECT_EQ(d.culprits, (std::vector<int>{2, 3}));
  EXPECT_NE(d.report.find("not answering: rank 2 (node-b): its status server refused the "
                          "connection: the rank has ended (its process has exited or is ending)"),
            std::string::npos)
      << d.report;
  EXPECT_TRUE(d.report.ends_with("; 1 has arrived; a rank that has ended will never arrive"))
      << d.report;
  d = diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42)), silent});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived) << d.report;
  EXPECT_EQ(d.report.find("exited"), std::string::npos) << d.report;
}

// Note [A rank that leaves training alone]: a rank that said it left is
// named with its why, apart from the ranks that do not answer, and ends the
// job as one that has ended does.
TEST(WatchdogDiagnosis, APeerThatSaidItLeftIsNamedWithWhy) {
  PeerAnswer left{2,
                  "node-b",
                  false,
                  "it left training, failing with: data: bad label 11",
                  {},
                  true,
                  "data: bad label 11"};
  PeerAnswer silent{3, "node-b", false, "no answer within 2.0 s", {}};
  const Diagnosis d = diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42)), left, silent});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kPeerEnded) << d.report;
  EXPECT_EQ(d.culprits, (std::vector<int>{3, 2}));
  EXPECT_NE(d.report.find(": 2 of 3 peers have not arrived; not answering: rank 3 (node-b): no "
                          "answer within 2.0 s; left training: rank 2 (node-b), failing with: "
                          "data: bad label 11; 1 has arrived; a rank that has ended will never "
                          "arrive"),
            std::string::npos)
      << d.report;
}

TEST(WatchdogDiagnosis, EveryoneArrivedMeansTheCollectiveItselfIsStuck) {
  const Diagnosis d = diagnose(rank(0, 43, 42), {answer(rank(1, 43, 42)), answer(rank(2, 43, 42))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kAllArrived);
  EXPECT_TRUE(d.culprits.empty());
  EXPECT_NE(d.report.find("all 2 peers arrived at it, so the collective itself is stuck (network "
                          "or library)"),
            std::string::npos)
      << d.report;
  EXPECT_EQ(d.report.find("NCCL_DEBUG"), std::string::npos) << d.report;
}

// Under NCCL the report says how to get NCCL's own account; alone, a rank
// names no peers.
TEST(WatchdogDiagnosis, AStuckNcclCollectiveAndOneWithoutPeers) {
  const auto onNccl = [](RankStatus s) {
    s.channels.front().channel = "nccl";
    return s;
  };
  Diagnosis d = diagnose(onNccl(rank(0, 43, 42)), {answer(onNccl(rank(1, 43, 42)))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kAllArrived);
  EXPECT_NE(d.report.find("all 1 peers arrived at it, so the collective itself is stuck (network "
                          "or library); NCCL_DEBUG=INFO makes NCCL log what it does"),
            std::string::npos)
      << d.report;
  d = diagnose(rank(0, 43, 42), {});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kAllArrived);
  EXPECT_NE(d.report.find("for 4.0 s: it has no peers, so the collective itself is stuck (the "
                          "library or the device)"),
            std::string::npos)
      << d.report;
}

TEST(WatchdogDiagnosis, NothingPendingIsNoStall) {
  const Diagnosis d = diagnose(rank(0, 43), {answer(rank(1, 42))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNothingPending);
}

TEST(WatchdogDiagnosis, ManyAbsentRanksAreSummarised) {
  std::vector<PeerAnswer> peers;
  for (int r = 1; r <= 20; ++r)
    peers.push_back(answer(rank(r, 10)));
  const Diagnosis d = diagnose(rank(0, 43, 42), peers);
  EXPECT_EQ(d.culprits.size(), 20u);
  EXPECT_NE(d.report.find("20 of 20 peers have not arrived"), std::string::npos);
  EXPECT_NE(d.report.find("and 12 more"), std::string::npos) << d.report;
}

// A rank out of collectives whose status server described its training thread.
RankStatus described(int r, std::uint64_t issued, std::vector<std::string> stack = {}) {
  RankStatus s = rank(r, issued);
  s.thread = "its training thread is asleep in the kernel's futex_wait_queue";
  s.stack = std::move(stack);
  return s;
}

TEST(WatchdogDiagnosis, AnAbsentRanksThreadAndStackAreReported) {
  const Diagnosis d = diagnose(
      rank(0, 43, 42), {answer(described(1, 42, {"pthread_cond_wait (libc.so.6)", "main (app)"})),
                        answer(rank(2, 43, 42))});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kNotArrived);
  EXPECT_NE(d.report.find("rank 1 (node-a) is not in any collective for 3.5 s, now at step 12 "
                          "(its last mpi collective: #41): its training thread is asleep in the "
                          "kernel's futex_wait_queue"),
            std::string::npos)
      << d.report;
  EXPECT_EQ(d.details, (std::vector<std::string>{
                           "stack of rank 1 (node-a)'s training thread, innermost first:",
                           "  #0 pthread_cond_wait (libc.so.6)", "  #1 main (app)"}));
}

TEST(WatchdogDiagnosis, QuietSecondsIsTheLeastIdleContextOrHeartbeatTimeOrZeroWhileOneWaits) {
  RankStatus s = rank(0, 10);
  EXPECT_DOUBLE_EQ(quietSeconds(s), 3.5);
  s.channels[0].contextSeconds = 2.5;  // a new step or evaluation batch since the last collective
  EXPECT_DOUBLE_EQ(quietSeconds(s), 2.5);
  ChannelActivity busier;
  busier.channel = "nccl";
  busier.idleSeconds = 1.5;
  busier.contextSeconds = 9.0;
  s.channels.push_back(busier);
  EXPECT_DOUBLE_EQ(quietSeconds(s), 1.5);
  s.heartbeatSeconds = 0.5;  // Note [Heartbeats of local work]: loading moves on
  EXPECT_DOUBLE_EQ(quietSeconds(s), 0.5);
  EXPECT_DOUBLE_EQ(quietSeconds(rank(0, 43, 42)), 0.0);
  EXPECT_DOUBLE_EQ(quietSeconds(RankStatus{}), 0.0);
}

TEST(WatchdogDiagnosis, AQuietRankReportsItselfAndWhatEachPeerDoes) {
  PeerAnswer silent{3, "node-b", false, "its process (pid 7) is stopped", {}};
  const Diagnosis d = diagnoseQuiet(
      described(0, 10, {"read (libc.so.6)"}),
      {answer(described(1, 10, {"read (libc.so.6)"})), answer(rank(2, 11, 10)), silent});
  EXPECT_EQ(d.verdict, Diagnosis::Verdict::kOutsideCollectives);
  EXPECT_EQ(d.culprits, (std::vector<int>{0, 1}));  // itself and the other quiet rank
  EXPECT_EQ(d.report.rfind("rank 0 (node-a) has made no progress for 3.5 s (no collective, no "
                           "new step or evaluation batch, no heartbeat from loading or saving), "
                           "now at step 12: its training thread is asleep",
                           0),
            0u)
      << d.report;
  EXPECT_NE(d.report.find("the other ranks: rank 1 (node-a) is not in any collective for 3.5 s, "
                          "now at step 12: its training thread is asleep"),
            std::string::npos)
      << d.report;
  EXPECT_NE(d.report.find("rank 2 (node-b) waits in mpi " + kAllreduce + " #10"), std::string::npos)
      << d.report;
  EXPECT_NE(d.report.find("not answering: rank 3 (node-b): its process (pid 7) is stopped"),
            std::string::npos)
      << d.report;
  EXPECT_EQ(
      d.details,
      (std::vector<std::string>{
          "stack of rank 0 (node-a)'s training thread, innermost first:", "  #0 read (libc.so.6)",
          "stack of rank 1 (node-a)'s training thread, innermost first:",
          "  #0 read (libc.so.6)"}));
}

TEST(RankStatusWire, RoundTripsAndCleansSeparators) {
  RankStatus s = rank(5, 43, 42, "allreduce(float32 x 8,\tsum)");
  ChannelActivity idle;
  idle.channel = "nccl";
  idle.issued = 7;
  idle.idleSeconds = 0.25;
  idle.contextSeconds = 0.125;
  idle.context = "step 3\nbucket 1";
  s.channels.push_back(idle);
  const RankStatus back = RankStatus::decode(s.encode());
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.host, "node-b");
  EXPECT_EQ(back.pid, 1005);
  ASSERT_EQ(back.channels.size(), 2u);
  ASSERT_TRUE(back.channels[0].oldestPending);
  EXPECT_EQ(back.channels[0].oldestPending->sequence, 42u);
  EXPECT_EQ(back.channels[0].oldestPending->what, "allreduce(float32 x 8, sum)");
  EXPECT_DOUBLE_EQ(back.channels[0].oldestPending->waitingSeconds, 4.0);
  EXPECT_FALSE(back.channels[1].oldestPending);
  EXPECT_EQ(back.channels[1].context, "step 3 bucket 1");
  EXPECT_EQ(back.channels[1].issued, 7u);
  EXPECT_DOUBLE_EQ(back.channels[1].contextSeconds, 0.125);
  EXPECT_TRUE(back.thread.empty());
  EXPECT_TRUE(back.stack.empty());
  EXPECT_TRUE(std::isinf(back.heartbeatSeconds)) << "no heartbeat yet";
  s.heartbeatSeconds = 1.75;
  EXPECT_DOUBLE_EQ(RankStatus::decode(s.encode()).heartbeatSeconds, 1.75);
  s.thread = "its training thread is\trunning";
  s.stack = {"f (a.so)", "g\n(b.so)"};
  const RankStatus withThread = RankStatus::decode(s.encode());
  EXPECT_EQ(withThread.thread, "its training thread is running");
  EXPECT_EQ(withThread.stack, (std::vector<std::string>{"f (a.so)", "g (b.so)"}));
}

// Note [Heartbeats of local work]. Nothing else in this program beats.
TEST(Heartbeat, CountsFromTheLastBeatOfAnyThread) {
  EXPECT_TRUE(std::isinf(secondsSinceHeartbeat())) << "before the first";
  std::thread([] { heartbeat(); }).join();
  EXPECT_LT(secondsSinceHeartbeat(), 1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double before = secondsSinceHeartbeat();
  EXPECT_GE(before, 0.2);
  heartbeat();
  EXPECT_LT(secondsSinceHeartbeat(), before) << "a new beat starts the count again";
}

TEST(RankStatusWire, MalformedTextIsADataError) {
  EXPECT_THROW(RankStatus::decode("hello\n"), DataError);
  EXPECT_THROW(RankStatus::decode("channel\tmpi\t1\t0\t0\t\n"), DataError);  // no rank line
  EXPECT_THROW(RankStatus::decode("rank\tx\th\t1\n"), DataError);
}

}  // namespace
}  // namespace ddp::comm
