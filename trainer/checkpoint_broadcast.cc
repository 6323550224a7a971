#include "trainer/checkpoint_broadcast.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "runtime/error.h"

namespace ddp::trainer {
namespace {

// What the ranks must agree on before any piece travels: one line per
// tensor, in the order they travel.
std::string tensorList(Sequential& model, const std::vector<OptimizerState>& slots,
                       bool holdsState) {
  std::string list;
  for (Parameter* p : model.parameters())
    list += str(p->name, " ", p->value.numel(), "\n");
  if (!holdsState) return list;
  for (const OptimizerState& slot : slots)
    list += str("optimizer.", slot.name, " ", numelOf(slot.shape), "\n");
  return list;
}

// The first line where `mine` and the root's list differ, for the message.
std::string firstDifference(const std::string& mine, const std::string& roots, int root) {
  const auto lines = [](const std::string& list) {
    std::vector<std::string> all;
    for (std::size_t at = 0; at < list.size();) {
      const std::size_t end = list.find('\n', at);
      all.push_back(list.substr(at, end - at));
      at = end + 1;
    }
    return all;
  };
  const std::vector<std::string> a = lines(mine), b = lines(roots);
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i])
    ++i;
  const auto quoted = [i](const std::vector<std::string>& list) {
    return i < list.size() ? "'" + list[i] + "'" : std::string("nothing");
  };
  return str(quoted(a), " where rank ", root, " has ", quoted(b));
}

// The position and whether state follows, from the root to every rank.
CheckedCheckpoint sharePosition(comm::Communicator& comm, int root, CheckedCheckpoint checked) {
  TrainPosition& p = checked.position;
  std::array<std::int64_t, 16> fields = {static_cast<std::int64_t>(p.epoch),
                                         static_cast<std::int64_t>(p.consumed),
                                         static_cast<std::int64_t>(p.globalStep),
                                         p.worldSize,
                                         static_cast<std::int64_t>(p.epochSteps),
                                         std::bit_cast<std::int64_t>(p.epochLossSum),
                                         checked.holdsState ? 1 : 0,
                                         static_cast<std::int64_t>(p.globalBatch),
                                         static_cast<std::int64_t>(p.best.metric),
                                         static_cast<std::int64_t>(p.best.step),
                                         std::bit_cast<std::int64_t>(p.best.testLoss),
                                         std::bit_cast<std::int64_t>(p.best.testAccuracy),
                                         static_cast<std::int64_t>(p.best.testSamples),
                                         static_cast<std::int64_t>(p.best.evaluationsSince),
                                         static_cast<std::int64_t>(p.best.referenceStep),
                                         std::bit_cast<std::int64_t>(p.best.referenceValue)};
  comm.broadcastSync(std::span<std::int64_t>(fields), root);
  p.epoch = static_cast<std::size_t>(fields[0]);
  p.consumed = static_cast<std::size_t>(fields[1]);
  p.globalStep = static_cast<std::size_t>(fields[2]);
  p.worldSize = static_cast<int>(fields[3]);
  p.epochSteps = static_cast<std::size_t>(fields[4]);
  p.epochLossSum = std::bit_cast<double>(fields[5]);
  checked.holdsState = fields[6] != 0;
  p.globalBatch = static_cast<std::size_t>(fields[7]);
  p.best.metric = static_cast<BestMetric>(fields[8]);
  p.best.step = static_cast<std::size_t>(fields[9]);
  p.best.testLoss = std::bit_cast<double>(fields[10]);
  p.best.testAccuracy = std::bit_cast<double>(fields[11]);
  p.best.testSamples = static_cast<std::size_t>(fields[12]);
  p.best.evaluationsSince = static_cast<std::size_t>(fields[13]);
  p.best.referenceStep = static_cast<std::size_t>(fields[14]);
  p.best.referenceValue = std::bit_cast<double>(fields[15]);
  return checked;
}

}  // namespace

// Note [Restoring a checkpoint from one rank].
TrainPosition restoreCheckpointFromRoot(comm::Communicator& comm, int root,
                                        const SafetensorsFile* file,
                                        const CheckedCheckpoint& checked, Sequential& model,
                                        Optimizer& optimizer, std::size_t pieceBytes) {
  const bool atRoot = comm.rank() == root;
  DDP_CHECK(!atRoot || file != nullptr, "the root restores a checkpoint without its file");
  const CheckedCheckpoint shared = sharePosition(comm, root, checked);
  const std::vector<OptimizerState> slots = optimizer.state();
  const std::string mine = tensorList(model, slots, shared.holdsState);
  std::string roots = mine;
  comm::shareFrom(comm, root, roots);
  comm::agree(comm, [&] {
    if (mine != roots) {
      throw MismatchError(str("rank ", comm.rank(), " cannot restore the checkpoint rank ", root,
                              " read: its model and optimizer state differ from rank ", root,
                              "'s (", firstDifference(mine, roots, root),
                              "; the ranks' programs or options differ)"));
    }
  });

  const std::size_t pieceFloats = std::max<std::size_t>(1, pieceBytes / sizeof(float));
  // One buffer for every piece: the largest tensor's size, at most a piece.
  std::size_t largest = 0;
  for (Parameter* p : model.parameters())
    largest = std::max(largest, p->value.numel());
  for (const OptimizerState& slot : slots)
    largest = std::max(largest, numelOf(slot.shape));
  std::vector<float> piece(std::min(largest, pieceFloats));
  // Sends tensor `source` (the root's; null elsewhere) of `count` elements
  // piece by piece; `keep` takes each piece on every rank.
  const auto travel = [&](const Tensor* source, std::size_t count,
                          const std::function<void(std::size_t, std::span<const float>)>& keep) {
    for (std::size_t begin = 0; begin < count; begin += pieceFloats) {
      const std::span<float> part(piece.data(), std::min(pieceFloats, count - begin));
      if (atRoot) {
        const std::span<const float> from(source->data() + begin, part.size());
        std::copy(from.begin(), from.end(), part.begin());
        file->release(from);
      }
      comm.broadcastSync(part, root);
      keep(begin, part);
    }
  };
  for (Parameter* p : model.parameters()) {
    travel(atRoot ? &file->tensors.at(p->name) : nullptr, p->value.numel(),
           [p](std::size_t begin, std::span<const float> values) {
             p->value.copyFromHost(begin, values);
           });
  }
  if (!shared.holdsState) {
    optimizer.clearState();
    return shared.position;
  }
  for (const OptimizerState& slot : slots) {
    travel(atRoot ? &checkpointTensor(*file, slot) : nullptr, numelOf(slot.shape),
           [&](std::size_t begin, std::span<const float> values) {
             optimizer.restoreState(slot, begin, values);
           });
  }
  return shared.position;
}

}  // namespace ddp::trainer
