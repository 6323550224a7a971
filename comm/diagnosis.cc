#include "comm/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::comm {
namespace {

constexpr std::size_t kListed = 8;        // ranks named per category, then "and N more"
constexpr std::size_t kStackFrames = 32;  // frames printed per stack

template <class T>
T number(const std::string& text) {
  std::istringstream in(text);
  T value{};
  if (!(in >> value)) throw DataError(str("watchdog: bad status field '", text, "'"));
  return value;
}

// What a rank that has not arrived is doing instead.
std::string doingInstead(const RankStatus& status) {
  if (const ChannelActivity* c = oldestPending(status)) {
    const PendingCollective& p = *c->oldestPending;
    return str("waits in ", c->channel, " ", p.what, " #", p.sequence,
               p.context.empty() ? "" : str(" (", p.context, ")"), " for ",
               secondsText(p.waitingSeconds));
  }
  // Idle since its first channel's last collective, now at that channel's context.
  const ChannelActivity none;
  const ChannelActivity& first = status.channels.empty() ? none : status.channels.front();
  return str("is not in any collective", status.thread.empty() ? " (computing or stalled)" : "",
             " for ", secondsText(first.idleSeconds),
             first.context.empty() ? "" : str(", now at ", first.context));
}

// ": its training thread is ...", or "".
std::string threadPart(const RankStatus& status) {
  return status.thread.empty() ? "" : ": " + status.thread;
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

std::string wireText(std::string text) {
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

const ChannelActivity* findChannel(const RankStatus& status, const std::string& channel) {
  for (const ChannelActivity& c : status.channels) {
    if (c.channel == channel) return &c;
  }
  return nullptr;
}

const ChannelActivity* oldestPending(const RankStatus& status) {
  const ChannelActivity* oldest = nullptr;
  for (const ChannelActivity& c : status.channels) {
    if (c.oldestPending && (oldest == nullptr || c.oldestPending->waitingSeconds >
                                                     oldest->oldestPending->waitingSeconds))
      oldest = &c;
  }
  return oldest;
}

std::string secondsText(double value) {
  return fixed(value, 1) + " s";
}

std::string rankName(int rank, const std::string& host) {
  return str("rank ", rank, host.empty() ? "" : str(" (", host, ")"));
}

void appendStack(std::vector<std::string>& details, const std::string& name,
                 const RankStatus& status) {
  if (status.stack.empty()) return;
  details.push_back(str("stack of ", name, "'s training thread, innermost first:"));
  for (std::size_t i = 0; i < status.stack.size() && i < kStackFrames; ++i)
    details.push_back(str("  #", i, " ", status.stack[i]));
  if (status.stack.size() > kStackFrames)
    details.push_back(str("  ... ", status.stack.size() - kStackFrames, " more frames"));
}

std::string RankStatus::encode() const {
  std::string text = str("rank\t", rank, "\t", wireText(host), "\t", pid, "\n");
  for (const ChannelActivity& c : channels) {
    text += str("channel\t", wireText(c.channel), "\t", c.issued, "\t", c.idleSeconds, "\t",
                c.contextSeconds, "\t", wireText(c.context));
    if (c.oldestPending) {
      const PendingCollective& p = *c.oldestPending;
      text += str("\t", p.sequence, "\t", wireText(p.what), "\t", wireText(p.context), "\t",
                  p.waitingSeconds);
    }
    text += "\n";
  }
  if (std::isfinite(heartbeatSeconds)) text += str("heartbeat\t", heartbeatSeconds, "\n");
  if (!thread.empty()) text += str("thread\t", wireText(thread), "\n");
  for (const std::string& frame : stack)
    text += str("frame\t", wireText(frame), "\n");
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
    } else if (f[0] == "channel" && (f.size() == 6 || f.size() == 10)) {
      ChannelActivity c;
      c.channel = f[1];
      c.issued = number<std::uint64_t>(f[2]);
      c.idleSeconds = number<double>(f[3]);
      c.contextSeconds = number<double>(f[4]);
      c.context = f[5];
      if (f.size() == 10) {
        c.oldestPending =
            PendingCollective{number<std::uint64_t>(f[6]), f[7], f[8], number<double>(f[9])};
      }
      status.channels.push_back(std::move(c));
    } else if (f[0] == "heartbeat" && f.size() == 2) {
      status.heartbeatSeconds = number<double>(f[1]);
    } else if (f[0] == "thread" && f.size() == 2) {
      status.thread = f[1];
    } else if (f[0] == "frame" && f.size() == 2) {
      status.stack.push_back(f[1]);
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
  std::vector<std::string> absent, silent, left, diverged;
  std::vector<int> absentRanks, silentRanks, leftRanks, divergedRanks, endedRanks;
  std::size_t arrived = 0;
  for (const PeerAnswer& peer : peers) {
    if (peer.rank == self.rank) continue;
    const std::string name = rankName(peer.rank, peer.host);
    if (!peer.answered) {
      if (!peer.left.empty()) {  // Note [A rank that leaves training alone]
        left.push_back(str(name, ", failing with: ", peer.left));
        leftRanks.push_back(peer.rank);
      } else {
        silent.push_back(str(name, ": ", peer.error));
        silentRanks.push_back(peer.rank);
      }
      if (peer.ended) endedRanks.push_back(peer.rank);
      continue;
    }
    const ChannelActivity* theirs = findChannel(peer.status, mine->channel);
    const std::uint64_t issued = theirs != nullptr ? theirs->issued : 0;
    if (theirs != nullptr && theirs->oldestPending &&
        theirs->oldestPending->sequence == waiting.sequence) {
      if (theirs->oldestPending->what == waiting.what) {
        ++arrived;
        d.alsoWaiting.push_back(peer.rank);
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
                          : str(" (its last ", mine->channel, " collective: #", issued - 1, ")"),
              threadPart(peer.status)));
      absentRanks.push_back(peer.rank);
      if (absentRanks.size() <= kListed) appendStack(d.details, name, peer.status);
    } else {
      ++arrived;  // it is past #s: it completed it
    }
  }
  const std::string where =
      str(rankName(self.rank, self.host), " waits in ", mine->channel, " ", waiting.what, " #",
          waiting.sequence, waiting.context.empty() ? "" : str(" (", waiting.context, ")"), " for ",
          secondsText(waiting.waitingSeconds));
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
  if (!absent.empty() || !silent.empty() || !left.empty()) {
    d.verdict = Diagnosis::Verdict::kNotArrived;
    d.culprits = absentRanks;
    d.culprits.insert(d.culprits.end(), silentRanks.begin(), silentRanks.end());
    d.culprits.insert(d.culprits.end(), leftRanks.begin(), leftRanks.end());
    d.report = str(where, ": ", d.culprits.size(), " of ", others, " peers have not arrived");
    if (!absent.empty()) d.report += str(": ", listed(absent));
    if (!silent.empty()) d.report += str("; not answering: ", listed(silent));
    if (!left.empty()) d.report += str("; left training: ", listed(left));
    d.report += str("; ", arrived, arrived == 1 ? " has" : " have", " arrived");
    if (!endedRanks.empty()) {  // Note [A peer that has ended]
      d.verdict = Diagnosis::Verdict::kPeerEnded;
      d.report += str("; ", endedRanks.size() == 1 ? "a rank that has" : "ranks that have",
                      " ended will never arrive");
    }
    return d;
  }
  d.verdict = Diagnosis::Verdict::kAllArrived;
  d.report = others == 0
                 ? str(where,
                       ": it has no peers, so the collective itself is stuck (the library "
                       "or the device)")
                 : str(where, ": all ", arrived,
                       " peers arrived at it, so the collective itself is stuck (network or "
                       "library)");
  // What to look at next: the library's own account.
  if (mine->channel == "nccl") d.report += "; NCCL_DEBUG=INFO makes NCCL log what it does";
  return d;
}

double quietSeconds(const RankStatus& status) {
  if (status.channels.empty() || oldestPending(status) != nullptr) return 0.0;
  double quiet = status.channels.front().idleSeconds;
  for (const ChannelActivity& c : status.channels)
    quiet = std::min({quiet, c.idleSeconds, c.contextSeconds});
  return std::min(quiet, status.heartbeatSeconds);
}

Diagnosis diagnoseQuiet(const RankStatus& self, const std::vector<PeerAnswer>& peers) {
  Diagnosis d;
  d.verdict = Diagnosis::Verdict::kOutsideCollectives;
  const std::string context = self.channels.empty() ? "" : self.channels.front().context;
  const std::string name = rankName(self.rank, self.host);
  d.culprits.push_back(self.rank);
  appendStack(d.details, name, self);
  std::vector<std::string> others, silent;
  for (const PeerAnswer& peer : peers) {
    if (peer.rank == self.rank) continue;
    const std::string peerName = rankName(peer.rank, peer.host);
    if (!peer.answered) {
      silent.push_back(str(peerName, ": ", peer.error));
      continue;
    }
    others.push_back(str(peerName, " ", doingInstead(peer.status), threadPart(peer.status)));
    if (quietSeconds(peer.status) > 0.0) {
      d.culprits.push_back(peer.rank);
      if (d.culprits.size() <= kListed) appendStack(d.details, peerName, peer.status);
    }
  }
  d.report = str(name, " has made no progress for ", secondsText(quietSeconds(self)),
                 " (no collective, no new step or evaluation batch, no heartbeat from loading or "
                 "saving)",
                 context.empty() ? "" : str(", now at ", context), threadPart(self),
                 ". No collective timeout can see a rank stuck outside collectives, so the job "
                 "ends here");
  if (!others.empty()) d.report += str("; the other ranks: ", listed(others));
  if (!silent.empty()) d.report += str("; not answering: ", listed(silent));
  return d;
}

}  // namespace ddp::comm
