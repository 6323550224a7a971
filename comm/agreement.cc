#include "comm/agreement.h"

#include <algorithm>
#include <cstdint>
#include <exception>

#include "runtime/str.h"

namespace ddp::comm {

namespace {

// Note [What a peer's failure says] in comm/agreement.h.
constexpr std::size_t kToldFailures = 4;  // failed ranks whose messages every rank learns
constexpr std::size_t kToldBytes = 2000;  // of each message

std::string messageOf(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (message.size() > kToldBytes) message = message.substr(0, kToldBytes) + "...";
    return message;
  }
  return "";
}

// Rethrows this rank's own error, marked as known to every rank (Error::agreed).
[[noreturn]] void rethrowAgreed(const std::exception_ptr& local) {
  try {
    std::rethrow_exception(local);
  } catch (Error& e) {
    e.markAgreed();
    throw;
  }
}

}  // namespace

std::string peerFailureText(const std::vector<int>& ranks, const std::vector<std::string>& told) {
  const std::string who = str("stopping: rank", ranks.size() > 1 ? "s " : " ", join(ranks, ", "));
  if (told.empty())
    return str(who, " failed (see ", ranks.size() > 1 ? "their messages" : "its message", ")");
  std::string text = who + " failed: ";
  const std::string more = told.size() < ranks.size() ? str(" (told by the first ", told.size(),
                                                            "; see the others' messages)")
                                                      : std::string();
  if (std::all_of(told.begin(), told.end(), [&](const std::string& m) { return m == told[0]; }))
    return text + told[0] + more;
  for (std::size_t i = 0; i < told.size(); ++i)
    text += str(i > 0 ? "; " : "", "rank ", ranks[i], ": ", told[i]);
  return text + more;
}

void agree(Communicator& comm, const std::function<void()>& body) {
  std::exception_ptr local;
  try {
    body();
  } catch (const std::exception&) {
    local = std::current_exception();
  }
  // 0: succeeded; 1: failed; 2: failed on a UsageError (PeerFailedError::usage).
  std::int32_t failed = 0;
  if (local) {
    try {
      std::rethrow_exception(local);
    } catch (const UsageError&) {
      failed = 2;
    } catch (const std::exception&) {
      failed = 1;
    }
  }
  std::vector<std::int32_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::int32_t>(&failed, 1), std::span<std::int32_t>(all))
      ->wait(comm.options().timeout);
  std::vector<int> ranks;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] != 0) ranks.push_back(static_cast<int>(r));
  }
  if (ranks.empty()) return;
  const bool usage = std::all_of(ranks.begin(), ranks.end(),
                                 [&](int r) { return all[static_cast<std::size_t>(r)] == 2; });
  // Every rank learns what the first failed ranks said, so that rank 0's
  // log and the run's end line hold the cause, not only who.
  std::vector<std::string> told;
  try {
    for (std::size_t i = 0; i < std::min(ranks.size(), kToldFailures); ++i) {
      std::string message = comm.rank() == ranks[i] ? messageOf(local) : std::string();
      shareFrom(comm, ranks[i], message);
      told.push_back(std::move(message));
    }
  } catch (const std::exception&) {
    // A rank's own error matters more than a failure to share it.
    if (local) rethrowAgreed(local);
    throw PeerFailedError(peerFailureText(ranks, {}), ranks, usage);
  }
  if (local) rethrowAgreed(local);
  throw PeerFailedError(peerFailureText(ranks, told), ranks, usage);
}

void shareFrom(Communicator& comm, int root, std::string& bytes) {
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  comm.broadcastSync(std::span<std::int64_t>(&size, 1), root);
  bytes.resize(static_cast<std::size_t>(size));
  if (size > 0) {
    comm.broadcastSync(
        std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(bytes.data()), bytes.size()), root);
  }
}

}  // namespace ddp::comm
