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
// stall check does), the watchdog thread asks every peer: a desync ends the
// job at once through the handler, as a desync, not a timeout; otherwise it
// warns with the ranks that have not arrived, and says when the stall ends.
// When the collective reaches its timeout (Work::wait throws), the caller asks
// diagnose() for the same report to print before ending the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/activity.h"
#include "comm/communicator.h"

namespace ddp::comm {

// What one rank says about itself.
struct RankStatus {
  int rank = 0;
  std::string host;
  long pid = 0;
  std::vector<ChannelActivity> channels;

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
};

struct Diagnosis {
  enum class Verdict {
    kNothingPending,  // this rank waits for no collective
    kNotArrived,      // some peers have not arrived or do not answer
    kDesync,          // some peer waits in a different collective at the same position
    kAllArrived,      // every peer arrived: the collective itself is stuck
  };
  Verdict verdict = Verdict::kNothingPending;
  std::string report;         // one line, for the log
  std::vector<int> culprits;  // the ranks named: not arrived, not answering or diverged
  std::string channel;        // the communicator and collective it is about
  std::uint64_t sequence = 0;
};

// Explains why `self`'s oldest pending collective has not completed, from the
// peers' answers (Note [Watchdog reports]). Pure; any thread.
Diagnosis diagnose(const RankStatus& self, const std::vector<PeerAnswer>& peers);

struct WatchdogOptions {
  // Warn (and look for a desync) once a collective has waited this long.
  std::chrono::milliseconds stallAfter = std::chrono::seconds(60);
  // How long a peer gets to answer a status request.
  std::chrono::milliseconds probeTimeout = std::chrono::seconds(2);
};

class Watchdog {
 public:
  using Handler = std::function<void(const std::string& report)>;
  // Collective over `comm` (one allgather of host memory, then nothing on
  // `comm` again): starts the status server and the stall checker, which
  // watch every activity log of `comm`. `onDesync` is called once, on the
  // checker thread, with the report of a desync; it should end the job.
  // Throws CommError if no TCP port can be opened.
  Watchdog(Communicator& comm, std::string hostname, WatchdogOptions options, Handler onDesync);
  // Stops both threads. Never throws, never communicates.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Asks every peer (in parallel, each within probeTimeout) and explains this
  // rank's oldest pending collective. Any thread; never throws.
  Diagnosis diagnose() const;
  // This rank's own status, as the server sends it.
  RankStatus status() const;

 private:
  struct Peer {
    std::string host;
    std::uint16_t port = 0;
    std::vector<std::string> addresses;
  };
  PeerAnswer ask(int rank) const;
  void serve();
  void check();

  Communicator& comm_;
  std::string hostname_;
  WatchdogOptions options_;
  Handler onDesync_;
  std::vector<const ActivityLog*> logs_;
  std::vector<Peer> peers_;
  std::string cookie_;  // rank 0's; a request must start with it
  int listenFd_ = -1;
  int stopFd_ = -1;  // an eventfd that wakes the server

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread server_;
  std::thread checker_;
};

}  // namespace ddp::comm
