#include "comm/watchdog.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/socket.h"

namespace ddp::comm {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kRecordBytes = 1024;  // one rank's address record
constexpr std::size_t kProbeBatch = 64;     // peers asked at once
constexpr std::size_t kListed = 8;          // ranks named per category, then "and N more"

std::string clean(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
  return text;
}

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

template <class T>
T number(const std::string& text) {
  std::istringstream in(text);
  T value{};
  if (!(in >> value)) throw DataError(str("watchdog: bad status field '", text, "'"));
  return value;
}

std::string seconds(double value) {
  return fixed(value, 1) + " s";
}

const ChannelActivity* findChannel(const RankStatus& status, const std::string& channel) {
  for (const ChannelActivity& c : status.channels) {
    if (c.channel == channel) return &c;
  }
  return nullptr;
}

// The collective `status` has waited for longest, or null.
const ChannelActivity* oldestPending(const RankStatus& status) {
  const ChannelActivity* oldest = nullptr;
  for (const ChannelActivity& c : status.channels) {
    if (c.oldestPending && (oldest == nullptr || c.oldestPending->waitingSeconds >
                                                     oldest->oldestPending->waitingSeconds))
      oldest = &c;
  }
  return oldest;
}

// What a rank that has not arrived is doing instead.
std::string doingInstead(const RankStatus& status) {
  if (const ChannelActivity* c = oldestPending(status)) {
    const PendingCollective& p = *c->oldestPending;
    return str("waits in ", c->channel, " ", p.what, " #", p.sequence,
               p.context.empty() ? "" : str(" (", p.context, ")"), " for ",
               seconds(p.waitingSeconds));
  }
  // Idle since its first channel's last collective, now at that channel's context.
  const ChannelActivity none;
  const ChannelActivity& first = status.channels.empty() ? none : status.channels.front();
  return str("is not in any collective (computing or stalled) for ", seconds(first.idleSeconds),
             first.context.empty() ? "" : str(", now at ", first.context));
}

std::string rankName(int rank, const std::string& host) {
  return str("rank ", rank, host.empty() ? "" : str(" (", host, ")"));
}

// "a; b; c; and 4 more"
std::string listed(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < kListed; ++i)
    text += (i > 0 ? "; " : "") + items[i];
  if (items.size() > kListed) text += str("; and ", items.size() - kListed, " more");
  return text;
}

}  // namespace

std::string RankStatus::encode() const {
  std::string text = str("rank\t", rank, "\t", clean(host), "\t", pid, "\n");
  for (const ChannelActivity& c : channels) {
    text += str("channel\t", clean(c.channel), "\t", c.issued, "\t", c.idleSeconds, "\t",
                clean(c.context));
    if (c.oldestPending) {
      const PendingCollective& p = *c.oldestPending;
      text += str("\t", p.sequence, "\t", clean(p.what), "\t", clean(p.context), "\t",
                  p.waitingSeconds);
    }
    text += "\n";
  }
  return text;
}

RankStatus RankStatus::decode(const std::string& text) {
  RankStatus status;
  std::istringstream lines(text);
  std::string line;
  bool sawRank = false;
  while (std::getline(lines, line)) {
    const std::vector<std::string> f = splitTabs(line);
    if (f[0] == "rank" && f.size() == 4) {
      status.rank = number<int>(f[1]);
      status.host = f[2];
      status.pid = number<long>(f[3]);
      sawRank = true;
    } else if (f[0] == "channel" && (f.size() == 5 || f.size() == 9)) {
      ChannelActivity c;
      c.channel = f[1];
      c.issued = number<std::uint64_t>(f[2]);
      c.idleSeconds = number<double>(f[3]);
      c.context = f[4];
      if (f.size() == 9) {
        c.oldestPending =
            PendingCollective{number<std::uint64_t>(f[5]), f[6], f[7], number<double>(f[8])};
      }
      status.channels.push_back(std::move(c));
    } else {
      throw DataError(str("watchdog: malformed status line '", line, "'"));
    }
  }
  if (!sawRank) throw DataError("watchdog: status without a rank line");
  return status;
}

Diagnosis diagnose(const RankStatus& self, const std::vector<PeerAnswer>& peers) {
  Diagnosis d;
  const ChannelActivity* mine = oldestPending(self);
  if (mine == nullptr) {
    d.report = str(rankName(self.rank, self.host), " waits for no collective");
    return d;
  }
  const PendingCollective& waiting = *mine->oldestPending;
  d.channel = mine->channel;
  d.sequence = waiting.sequence;
  std::vector<std::string> absent, silent, diverged;
  std::vector<int> absentRanks, silentRanks, divergedRanks;
  std::size_t arrived = 0;
  for (const PeerAnswer& peer : peers) {
    if (peer.rank == self.rank) continue;
    const std::string name = rankName(peer.rank, peer.host);
    if (!peer.answered) {
      silent.push_back(str(name, ": ", peer.error));
      silentRanks.push_back(peer.rank);
      continue;
    }
    const ChannelActivity* theirs = findChannel(peer.status, mine->channel);
    const std::uint64_t issued = theirs != nullptr ? theirs->issued : 0;
    if (theirs != nullptr && theirs->oldestPending &&
        theirs->oldestPending->sequence == waiting.sequence) {
      if (theirs->oldestPending->what == waiting.what) {
        ++arrived;
      } else {
        diverged.push_back(str(name, " issued ", theirs->oldestPending->what,
                               theirs->oldestPending->context.empty()
                                   ? ""
                                   : str(" (", theirs->oldestPending->context, ")")));
        divergedRanks.push_back(peer.rank);
      }
    } else if (issued <= waiting.sequence) {
      absent.push_back(
          str(name, " ", doingInstead(peer.status),
              issued == 0 ? str(" (no ", mine->channel, " collective issued yet)")
                          : str(" (its last ", mine->channel, " collective: #", issued - 1, ")")));
      absentRanks.push_back(peer.rank);
    } else {
      ++arrived;  // it is past #s: it completed it
    }
  }
  const std::string where =
      str(rankName(self.rank, self.host), " waits in ", mine->channel, " ", waiting.what, " #",
          waiting.sequence, waiting.context.empty() ? "" : str(" (", waiting.context, ")"), " for ",
          seconds(waiting.waitingSeconds));
  const auto others = std::count_if(peers.begin(), peers.end(),
                                    [&](const PeerAnswer& p) { return p.rank != self.rank; });
  if (!diverged.empty()) {
    d.verdict = Diagnosis::Verdict::kDesync;
    d.culprits = divergedRanks;
    d.report = str("desync: the ranks' programs have diverged: as collective #", waiting.sequence,
                   " on ", mine->channel, " this ", rankName(self.rank, self.host), " issued ",
                   waiting.what, waiting.context.empty() ? "" : str(" (", waiting.context, ")"),
                   " but ", listed(diverged));
    return d;
  }
  if (!absent.empty() || !silent.empty()) {
    d.verdict = Diagnosis::Verdict::kNotArrived;
    d.culprits = absentRanks;
    d.culprits.insert(d.culprits.end(), silentRanks.begin(), silentRanks.end());
    d.report = str(where, ": ", d.culprits.size(), " of ", others, " peers have not arrived");
    if (!absent.empty()) d.report += str(": ", listed(absent));
    if (!silent.empty()) d.report += str("; not answering: ", listed(silent));
    d.report += str("; ", arrived, arrived == 1 ? " has" : " have", " arrived");
    return d;
  }
  d.verdict = Diagnosis::Verdict::kAllArrived;
  d.report = str(where, ": all ", arrived,
                 " peers arrived at it, so the collective itself is stuck (network or library)");
  return d;
}

Watchdog::Watchdog(Communicator& comm, std::string hostname, WatchdogOptions options,
                   Handler onDesync)
    : comm_(comm),
      hostname_(std::move(hostname)),
      options_(options),
      onDesync_(std::move(onDesync)),
      logs_(comm.activityLogs()) {
  net::Listener listener = net::listenTcp();
  std::string cookie = str(std::random_device{}(), std::random_device{}());
  std::string record = str(clean(hostname_), "\t", listener.port, "\t", cookie);
  for (const std::string& address : net::localAddresses())
    record += "\t" + address;
  record.resize(kRecordBytes, '\0');
  std::vector<char> records(kRecordBytes * static_cast<std::size_t>(comm.size()));
  comm.allgather(record.data(), records.data(), kRecordBytes, DataType::kUInt8)
      ->wait(comm.options().timeout);
  for (int r = 0; r < comm.size(); ++r) {
    const char* begin = records.data() + kRecordBytes * static_cast<std::size_t>(r);
    const std::vector<std::string> f = splitTabs(std::string(begin, strnlen(begin, kRecordBytes)));
    DDP_CHECK(f.size() >= 4, "watchdog: malformed address record");
    Peer peer{f[0], static_cast<std::uint16_t>(std::stoi(f[1])), {f.begin() + 3, f.end()}};
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
  if (checker_.joinable()) checker_.join();
  if (listenFd_ >= 0) close(listenFd_);
  if (stopFd_ >= 0) close(stopFd_);
}

RankStatus Watchdog::status() const {
  RankStatus status;
  status.rank = comm_.rank();
  status.host = hostname_;
  status.pid = static_cast<long>(getpid());
  for (const ActivityLog* log : logs_)
    status.channels.push_back(log->snapshot());
  return status;
}

void Watchdog::serve() {
  for (;;) {
    pollfd fds[2] = {{listenFd_, POLLIN, 0}, {stopFd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    net::Fd client(accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;
    // Bounded: a client that says nothing costs half a second, never a hang.
    std::string request;
    if (!net::receiveLine(client.get(), request, std::chrono::steady_clock::now() + 500ms))
      continue;
    if (request != cookie_) continue;
    net::sendAll(client.get(), status().encode(), std::chrono::steady_clock::now() + 1s);
  }
}

PeerAnswer Watchdog::ask(int rank) const {
  const Peer& peer = peers_[static_cast<std::size_t>(rank)];
  PeerAnswer answer;
  answer.rank = rank;
  answer.host = peer.host;
  const auto deadline = std::chrono::steady_clock::now() + options_.probeTimeout;
  // On this host loopback reaches it; elsewhere its own addresses, loopback excluded.
  std::vector<std::string> addresses;
  if (peer.host == hostname_) addresses.push_back("127.0.0.1");
  for (const std::string& a : peer.addresses) {
    if (a.rfind("127.", 0) != 0) addresses.push_back(a);
  }
  std::string error = "no address";
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    // Each address gets its share of the time left, so one dead link does not use all of it.
    const auto now = std::chrono::steady_clock::now();
    const auto share = (deadline - now) / static_cast<long>(addresses.size() - i);
    net::Fd fd = net::connectTcp(addresses[i], peer.port, now + share, error);
    if (!fd.valid()) continue;
    std::string text;
    if (!net::sendAll(fd.get(), cookie_ + "\n", deadline) ||
        !net::receiveAll(fd.get(), text, deadline)) {
      error = "connected but no status within the probe timeout";
      continue;
    }
    try {
      answer.status = RankStatus::decode(text);
      answer.answered = true;
      return answer;
    } catch (const DataError& e) {
      error = e.what();
    }
  }
  if (error == std::strerror(ECONNREFUSED)) {
    answer.error = "its status server refused the connection: the process has exited";
  } else {
    // A timeout says nothing more than "no answer"; other reasons (no route, ...) are kept.
    answer.error = str("no answer within ", seconds(options_.probeTimeout.count() / 1000.0),
                       error == net::kTimedOut ? "" : str(" (", error, ")"),
                       ": the process is stopped or gone, or its host is unreachable");
  }
  return answer;
}

Diagnosis Watchdog::diagnose() const {
  const RankStatus self = status();
  std::vector<PeerAnswer> answers(static_cast<std::size_t>(comm_.size()));
  for (std::size_t first = 0; first < answers.size(); first += kProbeBatch) {
    std::vector<std::thread> askers;
    for (std::size_t r = first; r < std::min(answers.size(), first + kProbeBatch); ++r) {
      if (static_cast<int>(r) == comm_.rank()) continue;
      askers.emplace_back([&, r] { answers[r] = ask(static_cast<int>(r)); });
    }
    for (std::thread& t : askers)
      t.join();
  }
  answers.erase(answers.begin() + comm_.rank());
  return comm::diagnose(self, answers);
}

void Watchdog::check() {
  struct Stall {
    std::string channel;
    std::uint64_t sequence = 0;
    double seconds = 0.0;
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
    log::warn(str("watchdog: the stall is over: ", stall->channel, " collective #", stall->sequence,
                  " completed after about ", seconds(stall->seconds)));
    stall.reset();
    return false;
  };
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, 250ms, [this] { return stopping_; })) {
    lock.unlock();
    const RankStatus self = status();
    const ChannelActivity* oldest = oldestPending(self);
    if (!stallLasts(oldest) && oldest != nullptr &&
        oldest->oldestPending->waitingSeconds * 1000 >=
            static_cast<double>(options_.stallAfter.count())) {
      const Diagnosis d = diagnose();
      // Only if this rank still waits for the same collective: one that
      // completed while the peers were asked was no stall.
      const RankStatus now = status();
      const ChannelActivity* still = findChannel(now, d.channel);
      const bool current = d.verdict != Diagnosis::Verdict::kNothingPending && still != nullptr &&
                           still->oldestPending && still->oldestPending->sequence == d.sequence;
      if (current && d.verdict == Diagnosis::Verdict::kDesync) {
        if (onDesync_) onDesync_(d.report);
      } else if (current) {
        log::warn(str("watchdog: stall: ", d.report));
        stall = Stall{d.channel, d.sequence, still->oldestPending->waitingSeconds};
      }
    }
    lock.lock();
  }
  lock.unlock();
  const RankStatus last = status();
  stallLasts(oldestPending(last));  // a stall that ended just before the stop
}

}  // namespace ddp::comm
