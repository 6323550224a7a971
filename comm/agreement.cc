#include "comm/agreement.h"

#include <cstdint>
#include <exception>

#include "runtime/str.h"

namespace ddp::comm {

void agree(Communicator& comm, const std::function<void()>& body) {
  std::exception_ptr local;
  try {
    body();
  } catch (const std::exception&) {
    local = std::current_exception();
  }
  const std::int32_t failed = local ? 1 : 0;
  std::vector<std::int32_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::int32_t>(&failed, 1), std::span<std::int32_t>(all))
      ->wait(comm.options().timeout);
  if (local) std::rethrow_exception(local);
  std::vector<int> ranks;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] != 0) ranks.push_back(static_cast<int>(r));
  }
  if (!ranks.empty()) {
    throw PeerFailedError(
        str("stopping: rank", ranks.size() > 1 ? "s " : " ", join(ranks, ", "), " failed (see ",
            ranks.size() > 1 ? "their messages" : "its message", ")"),
        ranks);
  }
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
