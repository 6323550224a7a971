#include "comm/consistency.h"

#include <cstdint>
#include <sstream>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::comm {
namespace {

std::string serialize(const ConsistencyItems& items) {
  std::string text;
  for (const auto& [key, value] : items)
    text += key + '\t' + value + '\n';
  return text;
}

ConsistencyItems parse(const std::string& text) {
  ConsistencyItems items;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    items.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return items;
}

std::int64_t hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  return static_cast<std::int64_t>(h);
}

// The first difference between this rank's items and rank 0's, as a sentence.
std::string firstDifference(int rank, const ConsistencyItems& mine,
                            const ConsistencyItems& theirs) {
  for (std::size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    if (i >= mine.size())
      return str("rank ", rank, " lacks ", theirs[i].first, " (", theirs[i].second, " on rank 0)");
    if (i >= theirs.size())
      return str("rank ", rank, " has ", mine[i].first, " (", mine[i].second,
                 "), which rank 0 lacks");
    if (mine[i].first != theirs[i].first) {
      return str("rank ", rank, " has ", mine[i].first, " where rank 0 has ", theirs[i].first);
    }
    if (mine[i].second != theirs[i].second) {
      return str("rank ", rank, ": ", mine[i].first, " is ", mine[i].second, " here but ",
                 theirs[i].second, " on rank 0");
    }
  }
  return str("rank ", rank, " differs from rank 0");
}

}  // namespace

void verifySameOnAllRanks(Communicator& comm, const ConsistencyItems& items) {
  const std::string text = serialize(items);
  const std::int64_t mine = hash(text);
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(all))
      ->wait(comm.options().timeout);
  std::vector<int> differing;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[0]) differing.push_back(static_cast<int>(r));
  }
  if (differing.empty()) return;

  std::int64_t length = static_cast<std::int64_t>(text.size());
  comm.broadcastSync(std::span<std::int64_t>(&length, 1), 0);
  std::vector<std::uint8_t> bytes(text.begin(), text.end());
  bytes.resize(static_cast<std::size_t>(length));
  comm.broadcastSync(std::span<std::uint8_t>(bytes), 0);
  if (all[static_cast<std::size_t>(comm.rank())] != all[0]) {
    throw MismatchError(
        firstDifference(comm.rank(), items, parse(std::string(bytes.begin(), bytes.end()))));
  }
  throw MismatchError(str("stopping: rank", differing.size() > 1 ? "s " : " ",
                          join(differing, ", "), differing.size() > 1 ? " hold" : " holds",
                          " a different build, model, data or options than rank 0 (see ",
                          differing.size() > 1 ? "their messages" : "its message", ")"));
}

}  // namespace ddp::comm
