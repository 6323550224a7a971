// What the watchdog concludes from the ranks' statuses: why a collective
// does not complete, or where a rank that makes no progress is (Note
// [Watchdog reports] and Note [Where a stuck rank is] in comm/watchdog.h).
// Pure functions of the statuses, with the status's wire format, callable
// from any thread; the Watchdog (comm/watchdog.h) asks the ranks and acts
// on the verdict.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "comm/activity.h"

namespace ddp::comm {

// What one rank says about itself.
struct RankStatus {
  int rank = 0;
  std::string host;
  long pid = 0;
  std::vector<ChannelActivity> channels;
  // While it waits for no collective: its training thread's state and the
  // CPUs the process used meanwhile, in words ("its training thread is
  // running on a CPU, and the process used 1.00 CPUs over the last 6.0 s");
  // "" otherwise (Note [Where a stuck rank is]).
  std::string thread;
  // That thread's call stack, innermost first, when it was asked for.
  std::vector<std::string> stack;
  // Seconds since its last heartbeat of local work (Note [Heartbeats of
  // local work] in runtime/heartbeat.h); infinity before the first.
  double heartbeatSeconds = std::numeric_limits<double>::infinity();

  // One line per field, tab-separated; strings lose tabs and newlines.
  std::string encode() const;
  // Throws DataError on malformed text.
  static RankStatus decode(const std::string& text);
};

// A peer's answer to a status request.
struct PeerAnswer {
  int rank = 0;
  std::string host;
  bool answered = false;
  std::string error;  // why not, when !answered
  RankStatus status;
  // Not answering because the rank has left training: its status server
  // refused the connection (its host is up, nothing listens on the port),
  // or, on this node, no process has its pid (Note [A peer that has ended]),
  // or it said so (`left`).
  bool ended = false;
  // Why the rank left training, as it told this one (Note [A rank that
  // leaves training alone]); "" when it did not. Not asked then.
  std::string left{};
};

struct Diagnosis {
  enum class Verdict {
    kNothingPending,      // this rank waits for no collective
    kNotArrived,          // some peers have not arrived or do not answer
    kDesync,              // some peer waits in a different collective at the same position
    kPeerEnded,           // some peer that has not arrived has ended: it never will
    kAllArrived,          // every peer arrived: the collective itself is stuck
    kOutsideCollectives,  // this rank has been in no collective for too long (diagnoseQuiet)
  };
  Verdict verdict = Verdict::kNothingPending;
  std::string report;            // one line, for the log
  std::vector<int> culprits;     // the ranks named: not arrived, not answering or diverged
  std::vector<int> alsoWaiting;  // the peers that wait in the same collective
  std::string channel;           // the communicator and collective it is about
  std::uint64_t sequence = 0;
  // Lines to print under the report: the call stacks of the ranks it names
  // that sent one.
  std::vector<std::string> details;
};

// Explains why `self`'s oldest pending collective has not completed, from the
// peers' answers (Note [Watchdog reports]). Pure; any thread.
Diagnosis diagnose(const RankStatus& self, const std::vector<PeerAnswer>& peers);

// Reports `self`, which waits for no collective and has issued none for
// long, with what each peer is doing (Note [Where a stuck rank is]). Pure.
Diagnosis diagnoseQuiet(const RankStatus& self, const std::vector<PeerAnswer>& peers);

// How long `status` has made no progress: waited for no collective on any
// of its channels, completed none, set no new context (a step, an
// evaluation batch) and sent no heartbeat; 0 when a collective is pending.
double quietSeconds(const RankStatus& status);

// `status`'s collective that has waited for longest, or null; points into
// `status`, as findChannel's answer does.
const ChannelActivity* oldestPending(const RankStatus& status);
// `status`'s activity on `channel`, or null.
const ChannelActivity* findChannel(const RankStatus& status, const std::string& channel);

// "61.0 s": a duration in a report.
std::string secondsText(double value);
// "rank 3 (node7)", or "rank 3" without a host.
std::string rankName(int rank, const std::string& host);
// Appends the lines that print `status`'s stack (if it sent one) under a
// report about the rank called `name`.
void appendStack(std::vector<std::string>& details, const std::string& name,
                 const RankStatus& status);

// The wire format's fields (RankStatus::encode, the watchdog's requests):
// `text` with its tabs and newlines made spaces, and one line split at its tabs.
std::string wireText(std::string text);
std::vector<std::string> splitTabs(const std::string& line);

}  // namespace ddp::comm
