#include "comm/watchdog.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <random>
#include <system_error>
#include <utility>

#include "runtime/error.h"
#include "runtime/heartbeat.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"
#include "runtime/socket.h"
#include "runtime/thread_state.h"

namespace ddp::comm {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kRecordBytes = 1024;  // one rank's address record
constexpr std::size_t kProbeBatch = 64;     // peers asked at once
constexpr int kQuietDeferrals = 20;  // checker ticks a quiet rank leaves a lower one to report
// For a launcher to stop every rank after one rank ended the job (Note [A
// peer that has ended]): mpirun sends SIGTERM, and SIGKILL 1 s later.
constexpr auto kLauncherStopping = 5s;
constexpr std::chrono::milliseconds kLauncherStoppingMs = kLauncherStopping;
// Once a stop was asked for, from then, and at least kFoundKillGrace from
// when the peer was found ended: the launcher's SIGTERM may be that stop, or
// come after it (Note [A stop asked for while a peer has ended]).
constexpr auto kStopKillGrace = 2s;
constexpr auto kFoundKillGrace = 1s;
constexpr auto kStackWait = 1s;  // for the training thread to run its handler
const std::string kStackRequest = "\tstack";
// Note [Telling rank 0 that the job ends]: this request's second line is the
// rank, a tab, and why; the answer kFirstToEnd, or kEndedBefore and the rank
// that ended the job first (Note [One rank ends the job]).
const std::string kEndingRequest = "\tending";
const std::string kFirstToEnd = "first";
const std::string kEndedBefore = "after ";
constexpr std::size_t kEndingBytes = 1 << 16;  // the longest why sent
constexpr auto kSilentRankZeroWait = 200ms;    // for a rank 0 that answers no status request
// Note [A rank that leaves training alone]: this request's second line is
// the rank, a tab, and why.
const std::string kLeftRequest = "\tleft";

// A kLeftRequest's or kEndingRequest's second line, from a peer of the
// `size` ranks other than `self`: its rank and why. Nullopt when it does not
// come within half a second, or is malformed.
std::optional<std::pair<int, std::string>> receivePeerWhy(int fd, int self, int size) {
  std::string line;
  if (!net::receiveLine(fd, line, std::chrono::steady_clock::now() + 500ms, kEndingBytes))
    return std::nullopt;
  const std::size_t tab = line.find('\t');
  if (tab == std::string::npos) return std::nullopt;
  int rank = -1;
  const auto [end, error] = std::from_chars(line.data(), line.data() + tab, rank);
  if (error != std::errc() || end != line.data() + tab || rank < 0 || rank >= size || rank == self)
    return std::nullopt;
  return std::pair{rank, line.substr(tab + 1)};
}

// Enough for a report at quietAfter (or at a --timeout near it), capped: a
// span longer than the history is reported as the history's.
std::chrono::steady_clock::duration cpuHistoryKept(std::chrono::milliseconds quietAfter) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::clamp<std::chrono::milliseconds>(quietAfter + std::chrono::minutes(1),
                                            std::chrono::minutes(10), std::chrono::minutes(30)));
}

}  // namespace

Watchdog::Watchdog(Communicator& comm, std::string hostname, WatchdogOptions options,
                   Handler endJob, EndingHandler onEnding)
    : comm_(comm),
      hostname_(std::move(hostname)),
      options_(options),
      endJob_(std::move(endJob)),
      onEnding_(std::move(onEnding)),
      logs_(comm.activityLogs()),
      cpuHistory_(cpuHistoryKept(options.quietAfter)) {
  installStackCapture();
  net::Listener listener = net::listenTcp();
  std::string cookie = str(std::random_device{}(), std::random_device{}());
  const std::string pids = pidNamespace();
  std::string record = str(wireText(hostname_), "\t", listener.port, "\t", cookie, "\t",
                           static_cast<long>(getpid()), "\t", wireText(pids));
  for (const std::string& address : net::localAddresses())
    record += "\t" + address;
  record.resize(kRecordBytes, '\0');
  std::vector<char> records(kRecordBytes * static_cast<std::size_t>(comm.size()));
  comm.allgather(record.data(), records.data(), kRecordBytes, DataType::kUInt8)
      ->wait(comm.options().timeout);
  for (int r = 0; r < comm.size(); ++r) {
    const char* begin = records.data() + kRecordBytes * static_cast<std::size_t>(r);
    const std::vector<std::string> f = splitTabs(std::string(begin, strnlen(begin, kRecordBytes)));
    DDP_CHECK(f.size() >= 6, "watchdog: malformed address record");
    Peer peer{f[0],
              static_cast<std::uint16_t>(std::stoi(f[1])),
              std::stol(f[3]),
              f[0] == hostname_ && !pids.empty() && f[4] == pids,
              {f.begin() + 5, f.end()}};
    if (r == 0) cookie_ = f[2];
    peers_.push_back(std::move(peer));
  }
  stopFd_ = eventfd(0, EFD_CLOEXEC);
  if (stopFd_ < 0) throw CommError(str("watchdog: eventfd(): ", std::strerror(errno)));
  listenFd_ = listener.fd.release();
  server_ = std::thread([this] { serve(); });
  checker_ = std::thread([this] { check(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  const std::uint64_t one = 1;
  if (stopFd_ >= 0) (void)!write(stopFd_, &one, sizeof one);
  if (server_.joinable()) server_.join();
  if (recorder_.joinable()) recorder_.join();  // within endingPatience
  if (checker_.joinable()) checker_.join();
  if (listenFd_ >= 0) close(listenFd_);  // the server never ran
  if (stopFd_ >= 0) close(stopFd_);
}

RankStatus Watchdog::activity() const {
  RankStatus status;
  status.rank = comm_.rank();
  status.host = hostname_;
  status.pid = static_cast<long>(getpid());
  for (const ActivityLog* log : logs_)
    status.channels.push_back(log->snapshot());
  status.heartbeatSeconds = secondsSinceHeartbeat();
  return status;
}

RankStatus Watchdog::status(bool withStack) const {
  RankStatus status = activity();
  const double quiet = quietSeconds(status);
  if (quiet > 0.0) {  // a thread waiting in a collective is in the library: no news
    status.thread = describeTrainingThread(quiet);
    if (withStack && trainingThread() != 0)
      status.stack = captureStack(trainingThread(), kStackWait);
  }
  return status;
}

ThreadId Watchdog::trainingThread() const {
  return logs_.empty() ? 0 : logs_.front()->issuer();
}

std::string Watchdog::describeTrainingThread(double quiet) const {
  const ThreadId thread = trainingThread();
  const auto sample = thread != 0 ? sampleThread(thread) : std::nullopt;
  if (!sample) return "";
  std::string text = str("its training thread is ", describeThreadState(*sample));
  // The CPUs used since the first sample inside the quiet span, both in
  // running time (runtime/cpu_history.h).
  if (const auto use =
          cpuHistory_.over(quiet, std::chrono::steady_clock::now(), processCpuSeconds())) {
    text += str(", and the process used ", fixed(use->cpus, 2), " CPUs over the last ",
                secondsText(use->seconds));
  }
  return text;
}

void Watchdog::sampleCpu() {
  cpuHistory_.add(std::chrono::steady_clock::now(), processCpuSeconds());
}

void Watchdog::serve() {
  // Requests are refused once the server has stopped serving (stopServing),
  // however it stops.
  const auto refuse = [this] {
    close(std::exchange(listenFd_, -1));
    serverDone_ = true;
  };
  for (;;) {
    // After stopServing, only the stop: the thread lives on until the
    // destructor joins it (a thread that ended unjoined is a leak to
    // ThreadSanitizer, and the process ends next anyway).
    pollfd fds[2] = {{stopFd_, POLLIN, 0}, {listenFd_, POLLIN, 0}};
    if (poll(fds, listenFd_ >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      refuse();
      return;
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      (void)!read(stopFd_, &count, sizeof count);
      std::lock_guard lock(mutex_);
      if (stopping_) {
        refuse();
        return;
      }
      refuse();  // stopServing
      continue;
    }
    if ((fds[1].revents & POLLIN) == 0) continue;
    net::Fd client(accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;
    // Bounded: a client that says nothing costs half a second, never a hang.
    std::string request;
    if (!net::receiveLine(client.get(), request, std::chrono::steady_clock::now() + 500ms))
      continue;
    if (request == cookie_ + kLeftRequest) {
      // Note [A rank that leaves training alone]: kept for the checker.
      if (auto left = receivePeerWhy(client.get(), comm_.rank(), comm_.size())) {
        std::lock_guard lock(leftMutex_);
        leftPeers_.emplace(left->first, std::move(left->second));
      }
      net::sendAll(client.get(), "noted\n", std::chrono::steady_clock::now() + 1s);
      continue;
    }
    if (request == cookie_ + kEndingRequest) {
      // Note [Telling rank 0 that the job ends]: answered once recorded.
      auto claim = receivePeerWhy(client.get(), comm_.rank(), comm_.size());
      if (comm_.rank() != 0 || !claim) continue;
      const auto& [rank, why] = *claim;
      const auto [first, claimed] = firstToEnd(rank);
      if (!claimed) {  // another rank's claim, or this rank's, tried again at another address
        net::sendAll(client.get(),
                     first == rank ? kFirstToEnd + "\n" : str(kEndedBefore, first, "\n"),
                     std::chrono::steady_clock::now() + 1s);
        continue;
      }
      // The first claim is answered once recorded, on a thread of its own:
      // the later claims are answered meanwhile, at once.
      try {
        recorder_ = std::thread([this, client = std::move(client), why = why] {
          if (onEnding_) onEnding_(why);
          net::sendAll(client.get(), kFirstToEnd + "\n", std::chrono::steady_clock::now() + 1s);
        });
      } catch (const std::system_error&) {  // no thread to be had: here, then
        if (onEnding_) onEnding_(why);
        net::sendAll(client.get(), kFirstToEnd + "\n", std::chrono::steady_clock::now() + 1s);
      }
      continue;
    }
    const bool withStack = request == cookie_ + kStackRequest;
    if (request != cookie_ && !withStack) continue;
    net::sendAll(client.get(), status(withStack).encode(), std::chrono::steady_clock::now() + 1s);
    ++statusRequestsAnswered_;
  }
}

bool Watchdog::exchange(int rank, const std::string& request,
                        std::chrono::steady_clock::time_point deadline, std::string& answer,
                        std::string& error) const {
  const Peer& peer = peers_[static_cast<std::size_t>(rank)];
  // On this host loopback reaches it; elsewhere its own addresses, loopback excluded.
  std::vector<std::string> addresses;
  if (peer.host == hostname_) addresses.push_back("127.0.0.1");
  for (const std::string& a : peer.addresses) {
    if (a.rfind("127.", 0) != 0) addresses.push_back(a);
  }
  error = "no address";
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    // Each address gets its share of the time left, so one dead link does not use all of it.
    const auto now = std::chrono::steady_clock::now();
    const auto share = (deadline - now) / static_cast<long>(addresses.size() - i);
    net::Fd fd = net::connectTcp(addresses[i], peer.port, now + share, error);
    if (!fd.valid()) continue;
    answer.clear();
    if (net::sendAll(fd.get(), request, deadline) && net::receiveAll(fd.get(), answer, deadline)) {
      return true;
    }
    error = "connected but no answer within the probe timeout";
  }
  return false;
}

PeerAnswer Watchdog::ask(int rank, bool withStack) const {
  const Peer& peer = peers_[static_cast<std::size_t>(rank)];
  PeerAnswer answer;
  answer.rank = rank;
  answer.host = peer.host;
  {
    std::lock_guard lock(leftMutex_);
    if (const auto it = leftPeers_.find(rank); it != leftPeers_.end()) {
      // It will never arrive (Note [A rank that leaves training alone]).
      answer.left = it->second;
      answer.error = str("it left training, failing with: ", answer.left);
      answer.ended = true;
      return answer;
    }
  }
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(silentMutex_);
    if (const auto it = silent_.find(rank);
        it != silent_.end() && now < it->second.first + options_.probeTimeout)
      return it->second.second;
  }
  const auto deadline = now + options_.probeTimeout;
  const std::string request = cookie_ + (withStack ? kStackRequest : "") + "\n";
  std::string text, error;
  if (exchange(rank, request, deadline, text, error)) {
    try {
      answer.status = RankStatus::decode(text);
      answer.answered = true;
      if (rank == 0) rankZeroSilent_ = false;
      return answer;
    } catch (const DataError& e) {
      error = e.what();
    }
  }
  if (error == std::strerror(ECONNREFUSED)) {  // Note [A peer that has ended]
    answer.error =
        "its status server refused the connection: the rank has ended (its process has exited or "
        "is ending)";
    answer.ended = true;
    return answer;
  }
  // A timeout says nothing more than "no answer"; other reasons (no route, ...) are kept.
  std::string why = "the process is stopped or gone, or its host is unreachable";
  if (peer.samePids) {  // on this node its process can be looked at
    const auto process = sampleProcess(peer.pid);
    why = !process ? str("its process (pid ", peer.pid, ") has exited")
                   : str("its process (pid ", peer.pid, ") is ", describeThreadState(*process));
    answer.ended = !process;
  }
  answer.error = str("no answer within ", secondsText(options_.probeTimeout.count() / 1000.0),
                     error == net::kTimedOut ? "" : str(" (", error, ")"), ": ", why);
  if (rank == 0) rankZeroSilent_ = true;
  std::lock_guard lock(silentMutex_);
  silent_[rank] = {std::chrono::steady_clock::now(), answer};
  return answer;
}

std::vector<PeerAnswer> Watchdog::askAll(bool withStacks) const {
  std::vector<PeerAnswer> answers(static_cast<std::size_t>(comm_.size()));
  for (std::size_t first = 0; first < answers.size(); first += kProbeBatch) {
    std::vector<std::thread> askers;
    for (std::size_t r = first; r < std::min(answers.size(), first + kProbeBatch); ++r) {
      if (static_cast<int>(r) == comm_.rank()) continue;
      askers.emplace_back([&, r] { answers[r] = ask(static_cast<int>(r), withStacks); });
    }
    for (std::thread& t : askers)
      t.join();
  }
  answers.erase(answers.begin() + comm_.rank());
  return answers;
}

std::optional<PeerAnswer> Watchdog::lowerRankWaitingAt(const RankStatus& self,
                                                       PeerAnswer* unanswered) const {
  for (int rank = comm_.rank() - 1; rank >= 0; --rank) {
    PeerAnswer peer = ask(rank, false);
    if (!peer.answered) {  // silent, ended or left: look at every peer
      if (unanswered != nullptr) *unanswered = std::move(peer);
      return std::nullopt;
    }
    // The one rule for a peer's answer: comm::diagnose, over this peer alone.
    // Waiting at #s in the same call or in another (a desync, which that
    // rank finds as well): the one to leave it to. Not arrived, or past it:
    // not that one.
    const Diagnosis one = comm::diagnose(self, {peer});
    if (one.verdict == Diagnosis::Verdict::kDesync || !one.alsoWaiting.empty()) return peer;
  }
  return std::nullopt;
}

std::optional<TimeoutDeferral> Watchdog::lowerRankReportingTimeout(
    std::chrono::milliseconds timeout) const {
  endingElsewhere_ = true;  // the caller ends the job, whoever reports
  const RankStatus self = activity();
  const ChannelActivity* oldest = oldestPending(self);
  if (oldest == nullptr) return std::nullopt;
  PeerAnswer unanswered;
  const std::optional<PeerAnswer> lower = lowerRankWaitingAt(self, &unanswered);
  if (!lower) {
    // Ended without saying why: it may have reported this timeout and
    // exited, the launcher stopping the job (Note [A peer that has ended]).
    if (unanswered.ended && unanswered.left.empty()) {
      if (unanswered.rank == 0) rankZeroEndAwaited_ = true;
      return TimeoutDeferral{unanswered.rank, kLauncherStoppingMs,
                             "has ended, perhaps having reported it (the launcher may be "
                             "stopping the job)"};
    }
    return std::nullopt;
  }
  // Its timeout fires once it has waited `timeout` (Work::wait), or the
  // checker's overdue check at quietAfter should no thread of it wait.
  const ChannelActivity* there = findChannel(lower->status, oldest->channel);
  const double waited =
      there != nullptr && there->oldestPending ? there->oldestPending->waitingSeconds : 0.0;
  const auto limit = std::max(timeout, options_.quietAfter);
  const auto left = std::chrono::milliseconds(
      std::max<long long>(0, limit.count() - static_cast<long long>(waited * 1000)));
  // Its report: it may ask a lower rank, then asks every peer, tells rank
  // 0, and the launcher stops the job.
  const auto report = 3 * options_.probeTimeout + options_.endingPatience + kLauncherStoppingMs;
  return TimeoutDeferral{lower->rank, left + report, "waits in it too and reports it"};
}

bool Watchdog::lowerRankQuiet(double limit) const {
  for (int rank = comm_.rank() - 1; rank >= 0; --rank) {
    const PeerAnswer peer = ask(rank, false);
    if (!peer.answered || quietSeconds(peer.status) >= limit - 1.0) return true;
  }
  return false;
}

Diagnosis Watchdog::diagnose(bool withStacks) const {
  if (withStacks) endingElsewhere_ = true;
  const RankStatus self = status();
  return comm::diagnose(self, askAll(withStacks));
}

void Watchdog::checkQuiet(const RankStatus& self, int& deferrals) {
  const double limit = static_cast<double>(options_.quietAfter.count()) / 1000.0;
  if (limit <= 0.0 || !quietArmed_ || quietSeconds(self) < limit) {
    deferrals = 0;
    return;
  }
  // A lower rank quiet as long reports the same, and one that does not
  // answer may have reported and exited already (mpirun is ending the job):
  // leave either a few ticks, and keep to that when it stops answering.
  if (deferrals > 0 && deferrals < kQuietDeferrals) {
    ++deferrals;
    return;
  }
  if (deferrals == 0 && lowerRankQuiet(limit)) {
    deferrals = 1;
    return;
  }
  if (quietSeconds(activity()) < limit) return;  // it issued one meanwhile
  endJob(diagnoseQuiet(status(true), askAll(true)));
}

void Watchdog::checkOverdue(const RankStatus& self) {
  const double limit = static_cast<double>(options_.quietAfter.count()) / 1000.0;
  const ChannelActivity* oldest = oldestPending(self);
  if (limit <= 0.0 || !quietArmed_ || endingElsewhere_ || oldest == nullptr ||
      oldest->oldestPending->waitingSeconds < limit) {
    return;
  }
  // Where the training thread is instead of raising the timeout: status()
  // leaves that out while a collective is pending.
  RankStatus here = status();
  if (const ThreadId thread = trainingThread(); thread != 0) {
    here.thread = describeTrainingThread(oldest->oldestPending->waitingSeconds);
    here.stack = captureStack(thread, kStackWait);
  }
  const std::vector<PeerAnswer> peers = askAll(true);
  if (endingElsewhere_) return;  // the timeout was raised meanwhile
  Diagnosis d = comm::diagnose(here, peers);
  const RankStatus now = activity();
  const ChannelActivity* still = findChannel(now, d.channel);
  if (d.verdict == Diagnosis::Verdict::kNothingPending || still == nullptr ||
      !still->oldestPending || still->oldestPending->sequence != d.sequence) {
    return;  // it completed while the peers were asked
  }
  d.report +=
      str(". No thread of this rank has raised --timeout for it",
          here.thread.empty() ? "" : str(" (", here.thread, ")"), ", so the watchdog ends the job");
  std::vector<std::string> details;
  appendStack(details, rankName(here.rank, here.host), here);
  d.details.insert(d.details.begin(), details.begin(), details.end());
  endJob(d);
}

std::chrono::milliseconds endingTime(const WatchdogOptions& options) {
  return options.probeTimeout + kLauncherStoppingMs;
}

std::pair<int, bool> Watchdog::firstToEnd(int rank) const {
  std::lock_guard lock(endingMutex_);
  if (endedBy_ >= 0) return {endedBy_, false};
  endedBy_ = rank;
  return {rank, true};
}

void Watchdog::stopServing() const {
  const std::uint64_t one = 1;
  if (stopFd_ >= 0) (void)!write(stopFd_, &one, sizeof one);
  // Bounded: the server may be running the onEnding handler.
  stops::Deadline deadline(options_.endingPatience);
  while (!serverDone_ && !deadline.passed())
    std::this_thread::sleep_for(1ms);
}

std::optional<std::string> Watchdog::announceEnding(const std::string& why) const {
  std::string line = wireText(why);
  if (line.size() >= kEndingBytes) line.resize(kEndingBytes - 1);
  const int self = comm_.rank();
  if (self == 0) {
    const auto [first, claimed] = firstToEnd(0);
    if (claimed && onEnding_) onEnding_(line);  // outside the lock: later claims are answered
    if (first == 0) return std::nullopt;
    return endedFirst(first);
  }
  // Rank 0 answers once its handler has returned (Note [Telling rank 0
  // that the job ends]); an answer or none, the job ends next. A rank 0
  // that did not answer its last status request (stopped, or its node
  // hung) gets the request without the wait: should it come back before
  // the job is gone, it still finds it.
  const bool silent = rankZeroSilent_;
  const auto deadline =
      std::chrono::steady_clock::now() +
      (silent ? kSilentRankZeroWait : options_.probeTimeout + options_.endingPatience);
  std::string answer, error;
  const std::string rankZero = rankName(0, peers_.front().host);
  if (!exchange(0, str(cookie_, kEndingRequest, "\n", self, "\t", line, "\n"), deadline, answer,
                error)) {
    if (error == std::strerror(ECONNREFUSED)) {
      // Rank 0 has exited, or is about to (stopServing), and the launcher
      // ends the job: unless it left training alone (it waits in
      // MPI_Finalize), or its end is what this rank ends the job for, the
      // launcher having had its time already (Note [A peer that has
      // ended]).
      std::lock_guard lock(leftMutex_);
      if (!leftPeers_.contains(0) && !rankZeroEndAwaited_)
        return str(rankZero, " has exited, and the launcher ends the job");
    } else {
      log::warn(str("watchdog: could not tell rank 0 that the job ends (",
                    silent ? "it did not answer its last status request either" : error,
                    "): the run's record may miss its end"));
    }
    return std::nullopt;  // nobody said the job ends otherwise: this rank ends it
  }
  // Note [One rank ends the job]: another rank claimed it first.
  int first = -1;
  if (answer.rfind(kEndedBefore, 0) == 0) {
    const char* begin = answer.data() + kEndedBefore.size();
    const char* end = answer.data() + answer.size();
    while (end > begin && (end[-1] == '\n' || end[-1] == '\r'))
      --end;
    const auto [at, parsed] = std::from_chars(begin, end, first);
    if (parsed != std::errc() || at != end || first < 0 || first >= comm_.size() || first == self)
      first = -1;
  }
  if (first < 0) return std::nullopt;
  return endedFirst(first);
}

std::string Watchdog::endedFirst(int rank) const {
  return str(rankName(rank, peers_[static_cast<std::size_t>(rank)].host),
             " ended the job first, and reports it");
}

void Watchdog::announceLeaving(const std::string& why) const {
  if (comm_.size() < 2) return;
  std::string line = str(comm_.rank(), "\t", wireText(why));
  if (line.size() >= kEndingBytes) line.resize(kEndingBytes - 1);
  // Note [A rank that leaves training alone]: one peer, which ends the job.
  const int told = comm_.rank() == 0 ? 1 : 0;
  const auto deadline = std::chrono::steady_clock::now() + options_.probeTimeout;
  std::string answer, error;
  if (!exchange(told, cookie_ + kLeftRequest + "\n" + line + "\n", deadline, answer, error) &&
      error != std::strerror(ECONNREFUSED)) {  // refused: that rank has ended as well
    log::warn(str("watchdog: could not tell rank ", told, " that this rank leaves training (",
                  error, "): the others find out at --stall-warning"));
  }
}

std::size_t Watchdog::leftPeerCount() const {
  std::lock_guard lock(leftMutex_);
  return leftPeers_.size();
}

void Watchdog::endJob(const Diagnosis& d) {
  if (ended_) return;
  ended_ = true;
  // Found ended, and left to the launcher for kLauncherStopping first.
  if (d.verdict == Diagnosis::Verdict::kPeerEnded &&
      std::find(d.culprits.begin(), d.culprits.end(), 0) != d.culprits.end())
    rankZeroEndAwaited_ = true;
  if (endJob_) endJob_(d);
}

void Watchdog::check() {
  struct Stall {
    std::string channel;
    std::uint64_t sequence = 0;
    double seconds = 0.0;
    bool warned = false;  // by this rank, not left to a lower one that waits too
  };
  std::optional<Stall> stall;  // the one reported, while it lasts
  // Says when the reported stall is over; true while it lasts.
  const auto stallLasts = [&stall](const ChannelActivity* oldest) {
    if (!stall) return false;
    if (oldest != nullptr && oldest->channel == stall->channel &&
        oldest->oldestPending->sequence == stall->sequence) {
      stall->seconds = oldest->oldestPending->waitingSeconds;
      return true;
    }
    if (stall->warned) {
      log::warn(str("watchdog: the stall is over: ", stall->channel, " collective #",
                    stall->sequence, " completed after about ", secondsText(stall->seconds)));
    }
    stall.reset();
    return false;
  };
  int quietDeferrals = 0;
  // The peers known to have left when the peers were last asked (Note [A
  // rank that leaves training alone]): one that leaves later is asked about
  // at once, stall reported or not.
  std::size_t leftAsked = 0;
  // A peer found ended without saying why, in the collective this rank
  // waits for: when, so that the launcher is left kLauncherStopping to end
  // the job first (Note [A peer that has ended]).
  struct EndedPeer {
    std::string channel;
    std::uint64_t sequence = 0;
    std::chrono::steady_clock::time_point seen;
  };
  std::optional<EndedPeer> endedPeer;
  // Note [A stop asked for while a peer has ended]: when a stop was first
  // seen asked for, and the collective the peers were last asked about since.
  std::optional<std::chrono::steady_clock::time_point> stopAsked;
  std::optional<std::pair<std::string, std::uint64_t>> askedSinceStop;
  // Note [Time the process was stopped]: the stops rank 0 has told of.
  int stopsSeen = stops::stopCount();
  auto stoppedSeen = stops::totalStopped();
  std::unique_lock lock(mutex_);
  for (;;) {
    // Note [Time the process was stopped]: a tick far later than asked
    // records a stop, which the times below then leave out.
    const auto due = std::chrono::steady_clock::now() + stops::kLookEvery;
    if (wake_.wait_until(lock, due, [this] { return stopping_; })) break;
    stops::noteWake(due, std::chrono::steady_clock::now());
    lock.unlock();
    if (const int count = stops::stopCount(); count != stopsSeen) {
      // Once a stop: another thread's later look may lengthen it a little.
      const auto stopped = stops::totalStopped();
      log::info(str("watchdog: this process was not run for ",
                    secondsText(std::chrono::duration<double>(stopped - stoppedSeen).count()),
                    " (stopped or starved: a suspended job, Ctrl-Z, a paused VM); the "
                    "collectives' timeouts and the watchdog leave that time out"));
      stopsSeen = count;
      stoppedSeen = stopped;
    }
    sampleCpu();
    const RankStatus self = activity();
    if (!ended_) checkQuiet(self, quietDeferrals);
    if (!ended_) checkOverdue(self);
    const ChannelActivity* oldest = oldestPending(self);
    const bool lasts = stallLasts(oldest);
    const std::size_t left = leftPeerCount();
    if (!stopAsked && options_.stopRequested && options_.stopRequested())
      stopAsked = std::chrono::steady_clock::now();
    const bool sameAsEnded = oldest != nullptr && endedPeer &&
                             endedPeer->channel == oldest->channel &&
                             endedPeer->sequence == oldest->oldestPending->sequence;
    // Note [A stop asked for while a peer has ended]: asked once per
    // collective, then again for a peer found ended, unless a lower rank
    // waiting there was left to ask (the stall lasts).
    const bool askForStop =
        stopAsked && oldest != nullptr &&
        ((sameAsEnded && !lasts) ||
         askedSinceStop != std::pair{oldest->channel, oldest->oldestPending->sequence});
    const auto waited = [oldest](std::chrono::milliseconds span) {
      return oldest != nullptr &&
             oldest->oldestPending->waitingSeconds * 1000 >= static_cast<double>(span.count());
    };
    const std::chrono::milliseconds grace = std::min(options_.stallAfter, options_.leftPeerGrace);
    const bool ask = (!lasts || left > leftAsked) && waited(left > 0 ? grace : options_.stallAfter);
    // Asked only because a stop was asked for: only a peer that has ended
    // is acted on; the rest is for the stall check at stallAfter.
    const bool onlyForStop = !ask && askForStop && waited(grace);
    if (!ended_ && (ask || onlyForStop)) {
      if (left == 0 && sameAsEnded &&
          std::chrono::steady_clock::now() <
              (stopAsked ? std::max(*stopAsked + kStopKillGrace, endedPeer->seen + kFoundKillGrace)
                         : endedPeer->seen + kLauncherStopping)) {
        lock.lock();
        continue;
      }
      if (stopAsked) askedSinceStop = std::pair{oldest->channel, oldest->oldestPending->sequence};
      leftAsked = left;
      // Note [Watchdog reports]: a lower rank that waits in it too asks
      // every peer and warns; this one says nothing of this stall.
      if (left == 0 && !lasts && lowerRankWaitingAt(self)) {
        stall = Stall{oldest->channel, oldest->oldestPending->sequence,
                      oldest->oldestPending->waitingSeconds, false};
        lock.lock();
        continue;
      }
      const Diagnosis d = diagnose();
      // Only if this rank still waits for the same collective: one that
      // completed while the peers were asked was no stall.
      const RankStatus now = activity();
      const ChannelActivity* still = findChannel(now, d.channel);
      const bool current = d.verdict != Diagnosis::Verdict::kNothingPending && still != nullptr &&
                           still->oldestPending && still->oldestPending->sequence == d.sequence;
      if (onlyForStop && d.verdict != Diagnosis::Verdict::kPeerEnded) {
        // Note [A stop asked for while a peer has ended]: nothing to say yet.
      } else if (current && d.verdict == Diagnosis::Verdict::kPeerEnded && left == 0 &&
                 !sameAsEnded) {
        endedPeer = EndedPeer{d.channel, d.sequence, std::chrono::steady_clock::now()};
        stall.reset();  // a stall warned before a stop was asked for: asked again after the grace
      } else if (current && (d.verdict == Diagnosis::Verdict::kDesync ||
                             d.verdict == Diagnosis::Verdict::kPeerEnded)) {
        Diagnosis ending = d;
        if (stopAsked && d.verdict == Diagnosis::Verdict::kPeerEnded)
          ending.report += "; the stop asked for needs every rank, so the job ends here instead";
        endJob(ending);
      } else if (current) {
        // Note [Watchdog reports]: a lower rank waiting too says the same.
        const bool warns = std::none_of(d.alsoWaiting.begin(), d.alsoWaiting.end(),
                                        [&](int peer) { return peer < comm_.rank(); });
        if (warns) log::warn(str("watchdog: stall: ", d.report));
        stall = Stall{d.channel, d.sequence, still->oldestPending->waitingSeconds, warns};
      }
    }
    lock.lock();
  }
  lock.unlock();
  const RankStatus last = activity();
  stallLasts(oldestPending(last));  // a stall that ended just before the stop
}

}  // namespace ddp::comm
