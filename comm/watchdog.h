// Watchdog: finds out why a collective is not completing, and says so.
//
// Note [Watchdog reports]
// A collective that does not complete has three possible causes, and the fix
// differs for each: a peer has not arrived (it died, stalled or is still
// computing), the peers arrived at different collectives (the ranks' programs
// diverged: a desync), or everyone arrived and the collective itself is stuck
// (network, library). A rank blocked in a collective cannot tell which from
// its own state, and the blocking call (MPI, NCCL) cannot be asked. So every
// rank runs a small status server on a side channel of its own (TCP, every
// interface, a port the kernel picks; addresses exchanged once at start-up).
// Asked, it answers with its communicators' activity logs (comm/activity.h):
// how many collectives it issued, the oldest one still pending and what it
// is doing now. The server is its own thread, so a rank stalled in compute
// or blocked in a collective still answers; a rank that does not answer
// within the probe timeout is dead or cut off, and is reported as such.
//
// Comparing the answers with this rank's oldest pending collective #s
// (sequence numbers count each communicator's collectives in issue order,
// identical on every rank of a correct program):
//   - a peer pending on #s with the same call has arrived;
//   - a peer pending on #s with a different call has diverged: desync;
//   - a peer that issued fewer than s + 1 collectives has not arrived;
//   - a peer past #s has completed it (its last data may still be in flight).
// When the oldest pending collective has waited `stallAfter` (as Horovod's
// stall check does), or `leftPeerGrace` once a peer has said it left
// training (Note [A rank that leaves training alone]), the watchdog thread
// asks every peer: a desync, or a peer that has ended (Note [A peer that
// has ended]), ends the job through the handler, not at the timeout; otherwise it warns with the
// ranks that have not arrived, and says when the stall ends. Only the lowest-numbered rank that
// waits in the stalled collective asks every peer and warns: the others waiting with it would say
// the same, so a thousand ranks waiting on one print one warning, not 999, and make about 2000
// status requests, not a million. So a waiting rank first asks the ranks below it, nearest first,
// and leaves the stall to the first one that waits in the same collective (that one asks every peer
// at its own stallAfter, or did). A rank asked that has not arrived is passed over; one that does
// not answer or has ended calls for asking every peer at once. So does a peer that said it left. An
// ended peer is acted on by whichever rank finds it. A desync is left to a lower rank waiting at #s
// in another call just the same: that rank finds the same desync, so the lowest rank waiting at #s
// ends the job, once, where every diverged rank did (several reports of one desync, several
// MPI_Aborts). A lower rank that arrives after that rank reported finds
// the desync itself; rank 0 tells it that another rank ended the job first
// (Note [One rank ends the job]).
// When the collective reaches its timeout (Work::wait throws), the caller asks
// diagnose() for the same report to print before ending the job: the lowest
// rank waiting in it does (Note [One report of a timeout]).
//
// Note [One report of a timeout]
// A collective that one rank never joins times out on every rank waiting in
// it, at about the same moment, and each of them ended the job with the
// same report: at a thousand ranks waiting on one, 999 reports, each asking
// every peer (its stack too: a signal to the late rank's training thread
// per report), about a million status requests, and as many MPI_Aborts. So
// the thread that raised the timeout does as the stall check does
// (lowerRankReportingTimeout): it asks the ranks below it, nearest first,
// and leaves the report to the first that waits in the same collective, or
// in a diverged one at its position. That rank's timeout fires too, and it
// asks every peer and ends the job; this one says so in an info line (seen
// with --log-all-ranks) and waits to be ended with it. A rank asked that
// has not arrived is passed over. One whose status server refuses the
// connection (or, on this node, whose process is gone) without its having
// said it left may have reported and exited already, the launcher stopping
// the job: it is left kLauncherStopping, as at the stall check (Note [A
// peer that has ended]); seen in 3 of 8 runs with rank 0 late at np=4.
// One that does not answer (stopped) or has left will not report, and this
// rank reports at once.
// So a late last rank costs 2n - 3 status requests at the timeout, a late
// rank 0 2n - 2, instead of (n - 1)^2. Should the job still run once the
// rank left to report has had its time (what was left of its timeout, or
// of quietAfter, when no thread of it may raise one, plus the time a report
// takes: a lower rank asked, every peer asked, rank 0 told, and the
// launcher's kLauncherStopping), this rank reports after all.
// A timeout the NCCL watchdog raises (Note [NCCL watchdog]) is left so too:
// its fatal handler is given the CommTimeoutError, and the aborted
// collective stays pending in the activity log (comm/activity.h), so the
// lower ranks are asked about it as on the MPI path. (Before, each rank
// reported it, and twice: from the NCCL watchdog's thread and from the
// training thread: Note [One thread ends the job] in launcher/job_ending.h.)
//
// Note [Where a stuck rank is]
// "Rank 3 has not arrived" says who, not why: the rank may be computing,
// asleep, waiting on a lock, or blocked on a disk or a network file system,
// and each needs another fix. Its status server, a thread of its own, can
// look at the rank's training thread (the one that issues collectives)
// without that thread's help: the kernel's state and wait channel for it
// (/proc/self/task/<tid>), and the CPU time the process used since its last
// collective (over the time it ran: runtime/cpu_history.h). So the report
// says, e.g., "its training thread is asleep in the kernel's futex_wait_queue
// (a lock or a condition variable), and the process used 0.00 CPUs over the
// last 61.0 s". For the report that ends the job, the server also interrupts
// that thread with a signal whose handler records its call stack
// (runtime/thread_state.h), printed under the report. Not for warnings: the
// signal makes a few system calls (poll, nanosleep) return early, which code
// outside ddp may not expect, so it is sent only where the job ends anyway.
//
// The collective timeout cannot see every hang: it fires on a rank that waits
// in a collective. If every rank is stuck outside communication (all blocked
// reading a hung network file system, a deadlock in a library they all call),
// no collective is pending anywhere and the job would hang in silence. So a
// rank that has made no progress for `quietAfter` ends the job itself, with
// the same account of its own thread, its stack, and every peer's state.
// Progress is a collective pending or completed, a new step or evaluation
// batch (the training thread sets the communicator's context at each), or a
// heartbeat of long local work: loading or generating the data, initialising
// the weights, reading or writing weights and checkpoints (Note [Heartbeats
// of local work] in runtime/heartbeat.h). ddp_train sets quietAfter to
// --timeout plus a grace (a tenth, at least 2 s): a peer that waits on this
// rank reports first, at --timeout, with the fuller picture. Of several
// quiet ranks the lowest-numbered reports; the others leave it a few seconds
// (then report themselves, should the job still run). Each asks the ranks
// below it, nearest first, and stops at the first quiet one, as the stall
// check does (Note [Watchdog reports]). A lower rank that
// no longer answers is left the same seconds: when every rank stalls at
// once, the lowest may have reported and exited before a higher one asks,
// and mpirun is already stopping the rest (one report, not two). ddp_train
// arms the check (armQuietCheck) as soon as the watchdog runs, so start-up
// is covered: a job whose every rank blocks reading its data from a hung
// file system (a batch job, whose user is not there to see it) ends with a
// report instead of burning its allocation, while a slow load that keeps
// moving goes on. Other work that runs longer than --timeout between two
// marks on every rank (one evaluation batch) needed a larger --timeout
// already, for the peers that wait through it on any one rank.
//
// The timeout itself is raised by the thread that waits (Work::wait, the
// NCCL watchdog). A collective can outlive it with nobody raising it: the
// issuing thread held inside the library's call that issues it (NCCL may
// block there setting up connections with a peer that never comes, and the
// NCCL watchdog cannot abort a communicator in the middle of a call), or
// busy elsewhere and never waiting. A pending collective counts as
// progress, so the quiet check stays silent too, and the stall warning
// would repeat for ever. So a collective pending for quietAfter (--timeout
// plus a grace) ends the job from the checker thread: the usual report of
// the peers, plus where the training thread is, with its stack. A thread
// that raised the timeout itself ends the job first; its report asks the
// peers with their stacks (diagnose(true)), which tells the checker to
// leave the ending to it.
//
// Note [A peer that has ended]
// A rank that has left training will never arrive at a collective, so
// waiting on for --timeout (300 s by default) only idles every other GPU.
// A process killed outright is the launcher's to see: mpirun ends the job,
// and so did srun with PMIx on the test cluster (1.3 s after a SIGKILL;
// with --kill-on-bad-exit, Note [A stop asked for while a peer has ended]).
// But a rank that fails alone (an error outside agree()) returns from
// training and waits in MPI_Finalize, whose fence needs every rank, so its
// process stays, and neither launcher ends anything. Its watchdog, though,
// has gone with its training: the status server closes when the Watchdog
// is destroyed. So at the stall check (stallAfter, --stall-warning), which
// asks every peer anyway, a peer whose server refuses the connection (its
// host up, nothing listening on its port) has ended, as has a peer on this
// node with no process of its pid; either ends the job there, with the
// usual report naming it, instead of at the timeout. A peer that does not
// answer at all (its node down, the network cut, the process stopped) may
// still come back, and is only warned about, as before. Measured on the
// development VM, a rank failing alone (--inject-fault error:1:5) with the
// default --timeout 300 and --stall-warning 60 under mpirun, before the
// Note below: the job ended after 61.7 s and 62.2 s, where such a run waited
// out the timeout before (300.1 s); under srun --mpi=pmix with
// --stall-warning 10, after 10.2 s.
//
// A peer found ended without having said why (the Note below) may have
// ended the job itself, though: it reported, called MPI_Abort and exited,
// and the launcher is stopping every rank (mpirun: SIGTERM, then SIGKILL
// 1 s later), which a rank that catches SIGTERM outlives by that second.
// A second report from such a rank names the wrong cause ("rank 0 has
// ended") after the real one, and its MPI_Abort a second banner. So that
// peer is left 5 s, and asked again: a job that still goes on ends then.
//
// Note [A stop asked for while a peer has ended]
// When a rank dies, a launcher may end the others gracefully: SIGTERM, then
// SIGKILL a grace later. mpirun's grace is 1 s
// (odls_base_sigkill_timeout); srun's, where it kills a step after a task's
// bad exit (srun --kill-on-bad-exit, KillOnBadExit=1 in slurm.conf), is
// KillWait, 30 s by default. ddp_train takes SIGTERM for a graceful stop,
// which every rank must agree on, so it cannot happen without the dead peer:
// the survivors wait in their collective through the whole grace, and a
// Slurm job's restart (DDP_RESTARTS) began 31 s after the kill instead of
// 2 s. So once a stop has been asked for (WatchdogOptions::stopRequested), a
// collective that has waited leftPeerGrace asks the peers once, as for a
// peer that said it left; a peer found ended ends the job 2 s after the
// stop was asked for (kStopKillGrace), and at least 1 s after it was found
// (a stop asked for before the peer ended), not 5 s after it was found
// (kLauncherStopping): a launcher whose SIGKILL follows its SIGTERM within
// the grace (mpirun's 1 s, ending the job of a peer that reported and
// aborted) still ends this rank first, with no second report. Nothing else found
// then is acted on or warned about before stallAfter: a stop may wait on a
// checkpoint's write. Measured with benchmarks/slurm_restart.sh (srun
// --kill-on-bad-exit, a rank SIGKILLed): the restart resumed 31 s after the
// kill before, 3 s after (4 s with the 2 s counted from when the peer was
// found instead of from the stop).
//
// Note [A rank that leaves training alone]
// That still leaves the peers waiting --stall-warning (60 s by default),
// and rank 0's report naming no cause: "a rank that has ended will never
// arrive", with the failure itself only in the failed rank's own log. But
// the failed rank knows both that it leaves and why. So before it returns
// (ddp_train: any ddp::Error it returns with, as it cannot tell whether its
// peers met the same, unless agree() shared it: Error::agreed) it tells
// one peer (announceLeaving): rank 0, which keeps the run's record, or rank
// 1 when it is rank 0. That peer keeps the why, and its checker, once its
// oldest collective has waited WatchdogOptions::leftPeerGrace (1 s)
// instead of stallAfter, asks every peer as at the stall check; the rank
// that left counts as ended, named with its why ("left training: rank 1
// (vm), failing with: ..."), and the job ends there. One peer is told, not
// all: ending the job is one rank's act, and a failure that every rank
// meets alike (a non-finite loss) would otherwise cost N^2 connections at
// a thousand ranks; an error agree() shared costs none.
// The grace is for such failures, which leave nothing that could be waited
// for: every rank throws at the same point and unwinds within milliseconds,
// its watchdog with it, so no rank is left waiting a second on one that
// said it left unless that rank really failed alone. A peer that left and
// is past the collective waited in (it failed later) counts as ended too:
// the next collective needs it. Measured on the development VM
// (benchmarks/ending_time.sh, --inject-fault error:1:5 and error:0:5 with
// the defaults): the job ended after 3.1 s instead of 62.1 s, rank 0's end
// line naming the error.
//
// Note [Telling rank 0 that the job ends]
// Rank 0 keeps the run's record (the last --metrics line: Note [The run's
// last --metrics line] in launcher/run_end.h), but any rank may end the
// job: its watchdog (a desync, a peer that has ended, a rank stuck outside
// collectives) or its training thread (a collective timed out there, an
// internal error). The rank that ends it calls MPI_Abort, and mpirun kills
// every other rank, rank 0 with its record unwritten. So before ending the
// job, a rank tells rank 0 why (announceEnding): a request to rank 0's
// status server, which runs the onEnding handler (ddp_train: write the end
// line) and answers once it has returned. Bounded at both ends, as
// everything on this channel: the handler must return within
// WatchdogOptions::endingPatience, and the teller waits no longer than the
// probe timeout plus that patience (refused at once when rank 0's process
// has exited), then ends the job anyway. A rank 0 that did not answer the
// teller's last status request (the report that ends the job asks every
// rank first) is stopped or cut off: the teller leaves the request with it
// and waits only 0.2 s, not the 4 s its answer would take to time out.
// Rank 0 ending the job itself runs its handler directly. Of several ranks
// ending the job at once, the first is recorded (Note [One rank ends the
// job]).
//
// Note [One rank ends the job]
// The rules above leave a failure that every rank waits on to one rank,
// the lowest waiting; they do not cover failures each rank meets on its
// own. A model too large for the GPUs runs every rank out of memory at the
// same allocation, a bug in ddp breaks an invariant on every rank alike,
// two ranks find one dead peer from different collectives, and a lower
// rank that arrives at a diverged collective after a higher one reported
// it finds the desync itself: each rank printed the whole report and
// called MPI_Abort, N reports at N ranks. So telling rank 0 is also a
// claim, and comes before the report: rank 0 keeps the first rank to claim
// (itself included) and records that rank's why only, on a thread of its
// own, so that every later claimant is answered at once with that rank
// (and the first, asking again at its next address, as itself). A later
// claimant says so in an info line (seen with --log-all-ranks; on rank 0,
// always) and waits for the job to be ended by the first: at most the time
// that rank's report and the launcher take (endingTime: a probe timeout
// for the peers' stacks and the launcher's kLauncherStopping), counted
// while the process runs. Should the job still run then, it reports after
// all.
// Rank 0 is often the first, and aborts moments after its report, so a
// later claim found its process ending: refused, or not answered at all,
// and the claimant reported too (three runs of five with every rank out of
// memory at np=4). So a rank that has reported stops its status server
// before it aborts (stopServing), and a claim that rank 0 refuses is taken
// for rank 0's exit, on which the launcher ends the job, and waited for as
// above. Not when rank 0 said it left training (Note [A rank that leaves
// training alone]: it waits in MPI_Finalize, and the launcher ends
// nothing), nor when rank 0's end is why the claimant ends the job, having
// left it to the launcher for kLauncherStopping already (Note [A peer that
// has ended], Note [One report of a timeout]): the claimant reports at
// once. Only then: a rank that reported looks "ended" to any rank that asks
// it afterwards, and at np=4 with a desync, rank 1 found rank 0 so while it
// diagnosed the desync that rank 0 had reported. A rank 0 that does not
// answer (stopped) leaves the claimant to report, as before.
// The cost: the report now waits for rank 0's answer, which the first
// claimant gets once the end line is written (within endingPatience), and
// for a rank 0 that is stopped but was not asked before, probeTimeout +
// endingPatience.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/diagnosis.h"
#include "runtime/cpu_history.h"

namespace ddp::comm {

// Note [One report of a timeout]: the lower rank left to report a timeout,
// and how long to leave it before reporting after all.
struct TimeoutDeferral {
  int rank = 0;
  std::chrono::milliseconds patience{0};
  std::string why;  // of that rank, for the log: "waits in it too and reports it"
};

struct WatchdogOptions {
  // Warn (and look for a desync) once a collective has waited this long.
  std::chrono::milliseconds stallAfter = std::chrono::seconds(60);
  // How long a peer gets to answer a status request.
  std::chrono::milliseconds probeTimeout = std::chrono::seconds(2);
  // End the job when this rank has made no progress (quietSeconds) for this
  // long, once armQuietCheck was called; 0: never (Note
  // [Where a stuck rank is]).
  std::chrono::milliseconds quietAfter{0};
  // How long rank 0's onEnding handler may take, and a rank telling it
  // waits for it beyond the probe timeout (Note [Telling rank 0 that the
  // job ends]).
  std::chrono::milliseconds endingPatience = std::chrono::seconds(2);
  // Once a peer has said it left training, how long a collective waits
  // before the peers are asked (if less than stallAfter): Note [A rank
  // that leaves training alone].
  std::chrono::milliseconds leftPeerGrace = std::chrono::seconds(1);
  // Whether a graceful stop has been asked for (ddp_train: a stop signal
  // has come); from then on a peer that has ended is looked for sooner
  // (Note [A stop asked for while a peer has ended]). Called on the checker
  // thread, every tick; must not block. Empty: never.
  std::function<bool()> stopRequested{};
};

// Note [One rank ends the job]: how long a later claimant waits for the
// first to have ended the job (its report asks every peer within
// probeTimeout, then the launcher stops every rank) before reporting itself.
std::chrono::milliseconds endingTime(const WatchdogOptions& options);

class Watchdog {
 public:
  using Handler = std::function<void(const Diagnosis&)>;
  // Called with why the job ends (one line), on rank 0 only, once: for the
  // first rank to end the job (Note [One rank ends the job]), on rank 0's
  // status server's thread when another rank tells it, else on the thread
  // of rank 0 that calls announceEnding. Must return within
  // WatchdogOptions::endingPatience.
  using EndingHandler = std::function<void(const std::string& why)>;
  // Collective over `comm` (one allgather of host memory, then nothing on
  // `comm` again): starts the status server and the stall checker, which
  // watch every activity log of `comm`. `endJob` is called at most once, on
  // the checker thread, with a desync or a rank out of collectives for
  // quietAfter; it should say why, tell rank 0 (announceEnding) and end the
  // job. `onEnding`: Note [Telling rank 0 that the job ends]. Throws
  // CommError if no TCP port can be opened.
  Watchdog(Communicator& comm, std::string hostname, WatchdogOptions options, Handler endJob,
           EndingHandler onEnding = {});
  // Stops both threads. Never throws, never communicates.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Asks every peer (in parallel, each within probeTimeout) and explains this
  // rank's oldest pending collective. With `withStacks`, the ranks that have
  // not arrived send their training thread's stack too: only where the job
  // ends next (Note [Where a stuck rank is]), so the checker then leaves an
  // overdue collective to this caller. Any thread; never throws.
  Diagnosis diagnose(bool withStacks = false) const;
  // Note [One report of a timeout]: this rank's oldest pending collective
  // timed out after `timeout` on the calling thread (Work::wait threw),
  // which ends the job unless this returns a lower rank that waits in it
  // too, and so reports it, with how long to leave that rank. nullopt:
  // report it here. Either way the checker leaves the collective to the
  // caller from now on (as after diagnose(true)). Asks peers one at a time,
  // each within probeTimeout. Any thread; never throws.
  std::optional<TimeoutDeferral> lowerRankReportingTimeout(std::chrono::milliseconds timeout) const;
  // This rank's own status, as the server sends it, with its training
  // thread's stack if `withStack`.
  RankStatus status(bool withStack = false) const;
  // From now on, end the job once this rank has been out of collectives for
  // quietAfter (Note [Where a stuck rank is]). Any thread.
  void armQuietCheck() { quietArmed_ = true; }
  // This rank sets out to end the job (MPI_Abort), because of `why`: tells
  // rank 0, which keeps the first rank to do so (Note [One rank ends the
  // job]) and has its onEnding handler record that rank's why. Returns why
  // the job ends without this rank's report ("rank 1 (vm) ended the job
  // first, and reports it"; "rank 0 (vm) has exited, and the launcher ends
  // the job": refused, and rank 0 did not say it left training), or
  // nullopt: this rank is the first, or rank 0 did not answer within
  // probeTimeout + endingPatience; it reports. On rank 0, claims and runs
  // the handler itself. Any thread; never throws.
  std::optional<std::string> announceEnding(const std::string& why) const;
  // This rank has reported why it ends the job and aborts next: its status
  // server stops, so that a rank claiming the job's end after it is
  // refused, as by a rank that has exited, instead of waiting for an
  // answer from a process being ended (Note [One rank ends the job]).
  // Returns once it has stopped, or after endingPatience. Any thread but
  // the server's; never throws.
  void stopServing() const;
  // This rank leaves training because of `why`, which its peers may not
  // know of (it returns, and waits in MPI_Finalize): tells rank 0, or rank
  // 1 when this is rank 0, whose checker then ends the job once a
  // collective has waited leftPeerGrace, naming this rank and `why` (Note
  // [A rank that leaves training alone]). Returns once told, or after at
  // most probeTimeout. Any thread; never throws.
  void announceLeaving(const std::string& why) const;

  // Status requests this rank's server has answered so far (tests count the
  // stall check's requests with it). Any thread.
  std::size_t statusRequestsAnswered() const { return statusRequestsAnswered_; }

 private:
  struct Peer {
    std::string host;
    std::uint16_t port = 0;
    long pid = 0;
    bool samePids = false;  // same host and pid namespace: its pid is one of ours
    std::vector<std::string> addresses;
  };
  // status() without the training thread's state: the checker's view.
  RankStatus activity() const;
  PeerAnswer ask(int rank, bool withStack) const;
  // Sends `request` to `rank`'s status server and reads its whole answer
  // before `deadline`, trying each of its addresses in turn (each with its
  // share of the time left). False with `error` set when none answered.
  bool exchange(int rank, const std::string& request,
                std::chrono::steady_clock::time_point deadline, std::string& answer,
                std::string& error) const;
  std::vector<PeerAnswer> askAll(bool withStacks) const;
  // The nearest lower rank that waits at the position of `self`'s oldest
  // pending collective (its channel's #s), in the same call or a diverged
  // one, with its answer; asked one at a time, from this rank down. That
  // rank then asks every peer itself. None when no lower rank waits there,
  // or when one asked does not answer, has ended or has left (Note
  // [Watchdog reports]): that one's answer then goes to `unanswered`, if
  // given. Classifies each answer with comm::diagnose.
  std::optional<PeerAnswer> lowerRankWaitingAt(const RankStatus& self,
                                               PeerAnswer* unanswered = nullptr) const;
  // Whether a lower rank, asked from this rank down, has been out of
  // collectives about `limit` seconds too, or does not answer (Note [Where a
  // stuck rank is]): it reports, or did and has exited.
  bool lowerRankQuiet(double limit) const;
  // How many peers said they left training (leftPeers_).
  std::size_t leftPeerCount() const;
  // The thread that issues this rank's collectives; 0 before it has.
  ThreadId trainingThread() const;
  // The training thread in words, over the last `quiet` seconds.
  std::string describeTrainingThread(double quiet) const;
  void sampleCpu();
  // Ends the job if this rank has been out of collectives for quietAfter
  // (Note [Where a stuck rank is]).
  void checkQuiet(const RankStatus& self, int& deferrals);
  // Ends the job if this rank's oldest collective has been pending for
  // quietAfter and no thread has reported it (Note [Where a stuck rank is]).
  void checkOverdue(const RankStatus& self);
  // Rank 0: the first rank to end the job, and whether this call made
  // `rank` it (none had before: the caller then has onEnding_ record its
  // why). Any thread.
  std::pair<int, bool> firstToEnd(int rank) const;
  // What a later claimant says of `rank`, the first (Note [One rank ends the job]).
  std::string endedFirst(int rank) const;
  // Calls endJob_ the first time only. Checker thread.
  void endJob(const Diagnosis& d);
  void serve();
  void check();

  Communicator& comm_;
  std::string hostname_;
  WatchdogOptions options_;
  Handler endJob_;
  EndingHandler onEnding_;
  std::vector<const ActivityLog*> logs_;
  std::vector<Peer> peers_;
  std::string cookie_;  // rank 0's; a request must start with it
  std::atomic<bool> quietArmed_{false};
  bool ended_ = false;  // endJob_ was called (checker thread)
  // Rank 0 did not answer this rank's last status request: announceEnding
  // does not wait for it.
  mutable std::atomic<bool> rankZeroSilent_{false};
  // Rank 0 was found ended, and this rank ends the job for it after
  // leaving it to the launcher (Note [A peer that has ended], Note [One
  // report of a timeout]): a claim it refuses is not waited on again (Note
  // [One rank ends the job]).
  mutable std::atomic<bool> rankZeroEndAwaited_{false};
  // Someone asked for stacks: the job ends by that caller's hand.
  mutable std::atomic<bool> endingElsewhere_{false};
  // The peers that said they left training, and why (server thread writes).
  mutable std::mutex leftMutex_;
  std::map<int, std::string> leftPeers_;
  std::atomic<std::size_t> statusRequestsAnswered_{0};
  // Rank 0: the first rank that set out to end the job, -1 before one did
  // (Note [One rank ends the job]).
  mutable std::mutex endingMutex_;
  mutable int endedBy_ = -1;
  // The peers that did not answer, when, and what ask() made of it: asked
  // again within probeTimeout, the same answer, so that a stopped peer costs
  // one probe timeout, not one per question (a lower rank asked, then every
  // peer).
  mutable std::mutex silentMutex_;
  mutable std::map<int, std::pair<std::chrono::steady_clock::time_point, PeerAnswer>> silent_;
  int listenFd_ = -1;  // closed by the server as it stops serving
  int stopFd_ = -1;    // an eventfd that wakes the server
  std::atomic<bool> serverDone_{false};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread server_;
  std::thread recorder_;  // rank 0: records the first claim another rank made
  std::thread checker_;

  // The process's CPU time, sampled by the checker each tick, for the CPUs
  // used over a span (describeTrainingThread).
  CpuHistory cpuHistory_;
};

}  // namespace ddp::comm
