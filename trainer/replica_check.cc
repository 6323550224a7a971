#include "trainer/replica_check.h"

#include <zlib.h>

#include <cstdio>
#include <map>

#include "runtime/error.h"
#include "runtime/str.h"
#include "trainer/checkpoint.h"

namespace ddp::trainer {
namespace {

std::string hex(std::int64_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}

// The CRC-32 of each tensor a checkpoint holds, in checkpointTensors' order.
std::vector<std::int64_t> tensorCrcs(Sequential& model, Optimizer& optimizer,
                                     std::vector<std::string>& names) {
  std::vector<std::int64_t> crcs;
  for (const auto& [name, tensor] : checkpointTensors(model, optimizer)) {
    const Tensor host = tensor->onHost();
    names.push_back(name);
    crcs.push_back(static_cast<std::int64_t>(
        crc32_z(0, reinterpret_cast<const Bytef*>(host.data()), host.numel() * sizeof(float))));
  }
  return crcs;
}

}  // namespace

std::optional<std::string> describeDivergence(const std::vector<std::vector<std::int64_t>>& crcs,
                                              const std::vector<std::string>& names,
                                              const std::vector<std::string>& hosts,
                                              const ReplicaCheckPoint& at) {
  std::map<std::vector<std::int64_t>, std::vector<std::size_t>> groups;
  for (std::size_t r = 0; r < crcs.size(); ++r)
    groups[crcs[r]].push_back(r);
  if (groups.size() <= 1) return std::nullopt;
  // The reference: the majority, or without one the group of rank 0.
  const std::vector<std::int64_t>* reference = &crcs[0];
  std::size_t referenceSize = groups[crcs[0]].size();
  for (const auto& [row, ranks] : groups) {
    if (2 * ranks.size() > crcs.size()) {
      reference = &row;
      referenceSize = ranks.size();
    }
  }
  const bool majority = 2 * referenceSize > crcs.size();
  const auto named = [&](std::size_t r) {
    return r < hosts.size() && !hosts[r].empty() ? str(r, " (", hosts[r], ")") : str(r);
  };
  std::string differing;
  std::size_t count = 0;
  for (std::size_t r = 0; r < crcs.size(); ++r) {
    if (crcs[r] == *reference) continue;
    std::size_t t = 0;
    while (t < names.size() && crcs[r][t] == (*reference)[t])
      ++t;
    differing += str(count++ == 0 ? "" : "; ", "rank ", named(r), ": ",
                     t < names.size() ? names[t] : std::string("a tensor"), " has CRC-32 ",
                     t < names.size() ? hex(crcs[r][t]) : "?", " against ",
                     t < names.size() ? hex((*reference)[t]) : "?");
  }
  const std::string against =
      majority ? str("the other ", referenceSize, " rank", referenceSize == 1 ? "" : "s")
               : str("rank 0's group of ", referenceSize,
                     " (there is no majority to tell which is right)");
  return str("the replicas have diverged between step ", at.agreedStep, " and step ", at.step,
             " (epoch ", at.epoch, "): ", count == 1 ? "one rank holds" : "ranks hold",
             " a different model from ", against, ": ", differing,
             ". Every rank applies the same averaged gradients, so only a fault can do this: a "
             "memory or CPU error on ",
             count == 1 ? "that host" : "those hosts",
             ", or a bug in ddp. Every checkpoint so far (step ", at.agreedStep,
             " and earlier) was written while the replicas agreed");
}

void verifyReplicasAgree(comm::Communicator& comm, Sequential& model, Optimizer& optimizer,
                         const std::vector<std::string>& hosts, const ReplicaCheckPoint& at) {
  std::vector<std::string> names;
  const std::vector<std::int64_t> mine = tensorCrcs(model, optimizer, names);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all))
      ->wait(comm.options().timeout);
  std::vector<std::vector<std::int64_t>> crcs;
  for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r)
    crcs.emplace_back(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size());
  const auto report = describeDivergence(crcs, names, hosts, at);
  if (!report) return;
  if (comm.rank() == 0) throw MismatchError(*report);
  throw MismatchError(
      str("stopping: the replicas have diverged by step ", at.step, " (see rank 0's message)"));
}

}  // namespace ddp::trainer
