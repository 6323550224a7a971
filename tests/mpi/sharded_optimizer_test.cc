// ShardedOptimizer (Note [Sharded optimizer state]): the layout in closed
// form, and at the world size mpirun gave (1, 2, 3), one rank's sharded
// update against the unsharded one on the same gradients, the state gathered
// to a root and a state restored piece by piece, each rank keeping its part.
#include "trainer/sharded_optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "comm/reducer.h"
#include "runtime/error.h"
#include "runtime/str.h"
#include "test_comm.h"
#include "trainer/adamw.h"
#include "trainer/sgd.h"

namespace ddp::trainer {
namespace {

TEST(ShardLayout, CutsTheParametersEndToEndLastFirstIntoEqualShards) {
  // E = 21 in backward order: p2 at 0, p1 at 7, p0 at 11
  const std::vector<std::size_t> numels = {10, 4, 7};
  // world 3: S = 7; rank 0 [0, 7), rank 1 [7, 14), rank 2 [14, 21)
  const ShardLayout r0 = computeShardLayout(numels, 3, 0);
  EXPECT_EQ(r0.elements, 21u);
  EXPECT_EQ(r0.shardElements, 7u);
  EXPECT_EQ(r0.offsets, (std::vector<std::size_t>{11, 7, 0}));
  EXPECT_EQ(r0.bounds, (std::vector<std::size_t>{0, 7, 14, 21}));
  ASSERT_EQ(r0.slices.size(), 1u);
  EXPECT_EQ(r0.slices[0].parameter, 2u);
  EXPECT_EQ(r0.slices[0].count, 7u);
  const ShardLayout r1 = computeShardLayout(numels, 3, 1);
  ASSERT_EQ(r1.slices.size(), 2u);  // all of the second parameter, the start of the first
  EXPECT_EQ(r1.slices[0].parameter, 1u);
  EXPECT_EQ(r1.slices[0].begin, 0u);
  EXPECT_EQ(r1.slices[0].count, 4u);
  EXPECT_EQ(r1.slices[0].shardOffset, 0u);
  EXPECT_EQ(r1.slices[1].parameter, 0u);
  EXPECT_EQ(r1.slices[1].begin, 0u);
  EXPECT_EQ(r1.slices[1].count, 3u);
  EXPECT_EQ(r1.slices[1].shardOffset, 4u);
  const ShardLayout r2 = computeShardLayout(numels, 3, 2);
  ASSERT_EQ(r2.slices.size(), 1u);
  EXPECT_EQ(r2.slices[0].parameter, 0u);
  EXPECT_EQ(r2.slices[0].begin, 3u);
  EXPECT_EQ(r2.slices[0].count, 7u);
  // world 4: S = ceil(21/4) = 6, the last shard [18, 21) = p0's last 3
  const ShardLayout last = computeShardLayout(numels, 4, 3);
  EXPECT_EQ(last.bounds, (std::vector<std::size_t>{0, 6, 12, 18, 21}));
  ASSERT_EQ(last.slices.size(), 1u);
  EXPECT_EQ(last.slices[0].parameter, 0u);
  EXPECT_EQ(last.slices[0].begin, 7u);
  EXPECT_EQ(last.slices[0].count, 3u);
}

// The Reducer's storage is the trainable gradients in backward order, the
// order the layout uses: every parameter's offset is its gradient's.
TEST(ShardLayout, OffsetsAreTheReducerStorageOffsets) {
  auto comm = comm::makeTestComm();
  const std::vector<std::size_t> numels = {1000, 1, 33, 500, 2};
  std::vector<comm::GradientSpec> specs;
  for (std::size_t p = 0; p < numels.size(); ++p)
    specs.push_back({str("p", p), numels[p], true});
  for (std::size_t cap : {std::size_t{0}, std::size_t{4096}, comm::kSingleBucket}) {
    comm::Reducer reducer(*comm, specs, {cap, cap, false, comm::GradCompression::kNone, {}});
    const ShardLayout layout = computeShardLayout(numels, 1, 0);
    const float* storage = static_cast<const float*>(reducer.storage().get());
    for (std::size_t p = 0; p < numels.size(); ++p)
      EXPECT_EQ(static_cast<std::size_t>(reducer.gradient(p).data() - storage), layout.offsets[p])
          << "cap " << cap << ", parameter " << p;
  }
}

TEST(ShardLayout, EveryElementIsOwnedOnce) {
  const std::vector<std::size_t> numels = {1000, 1, 33, 500, 2};
  for (int world : {1, 2, 3, 7, 16}) {
    std::vector<int> owners(1536, 0);
    for (int rank = 0; rank < world; ++rank) {
      const ShardLayout layout = computeShardLayout(numels, world, rank);
      for (const ShardSlice& s : layout.slices) {
        ASSERT_LE(s.shardOffset + s.count, layout.shardElements);
        for (std::size_t i = 0; i < s.count; ++i)
          ++owners[layout.offsets[s.parameter] + s.begin + i];
      }
    }
    for (int count : owners)
      ASSERT_EQ(count, 1) << "world " << world;
  }
}

TEST(ShardLayout, RefusesARankWithNothing) {
  // 5 elements over 4 ranks: S = 2, and the last rank would own none.
  const std::vector<std::size_t> numels = {3, 2};
  EXPECT_THROW(computeShardLayout(numels, 4, 0), UsageError);
  EXPECT_NO_THROW(computeShardLayout(numels, 3, 2));  // S = 2: 2, 2, 1
}

// A model of three parameters whose sizes do not divide by 2 or 3, values
// and gradients seeded by position only (the same on every rank).
struct Model {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Tensor> grads;
  explicit Model(const std::vector<Shape>& shapes = {{7, 5}, {5}, {3, 5}}) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      auto p = std::make_unique<Parameter>();
      p->name = str("p", i);
      p->value = Tensor(shapes[i]);
      p->grad = Tensor(shapes[i]);
      for (std::size_t j = 0; j < p->value.numel(); ++j)
        p->value.data()[j] = 0.01f * static_cast<float>((j * 7 + i) % 13) - 0.05f;
      owned.push_back(std::move(p));
    }
  }
  std::vector<Parameter*> parameters() {
    std::vector<Parameter*> all;
    for (auto& p : owned)
      all.push_back(p.get());
    return all;
  }
  void setGradients(int step) {
    for (std::size_t i = 0; i < owned.size(); ++i) {
      for (std::size_t j = 0; j < owned[i]->grad.numel(); ++j)
        owned[i]->grad.data()[j] =
            0.1f * static_cast<float>((j * 3 + i + static_cast<std::size_t>(step)) % 11) - 0.4f;
    }
  }
};

void expectSameValues(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)), 0) << what;
}

const AdamWOptions kAdamW{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, false};

std::unique_ptr<Optimizer> makeAdamW(std::vector<Parameter*> parameters) {
  return std::make_unique<AdamW>(std::move(parameters), kAdamW);
}

TEST(ShardedOptimizer, UpdatesEqualTheUnshardedOnesBitForBit) {
  auto comm = comm::makeTestComm();
  Model plain, sharded;
  AdamW reference(plain.parameters(), kAdamW);  // no bias decay: the 1-D p1 keeps its weights
  ShardedOptimizer optimizer(*comm, sharded.parameters(), makeAdamW);
  EXPECT_STREQ(optimizer.name(), "adamw");
  for (int step = 0; step < 3; ++step) {
    plain.setGradients(step);
    sharded.setGradients(step);
    reference.step({0.5f});  // with a clipping scale
    optimizer.step({0.5f});
  }
  for (std::size_t i = 0; i < plain.owned.size(); ++i)
    expectSameValues(plain.owned[i]->value, sharded.owned[i]->value, plain.owned[i]->name);
}

TEST(ShardedOptimizer, GathersTheWholeStateToTheRootAndTakesARestoreApart) {
  auto comm = comm::makeTestComm();
  Model plain, sharded;
  Sgd reference(plain.parameters(), {0.1f, 0.9f, 0.01f, false, true});
  const auto makeSgd = [](std::vector<Parameter*> parameters) -> std::unique_ptr<Optimizer> {
    return std::make_unique<Sgd>(std::move(parameters), SgdOptions{0.1f, 0.9f, 0.01f, false, true});
  };
  ShardedOptimizer optimizer(*comm, sharded.parameters(), makeSgd);
  // Before any step there is no state: nothing is gathered.
  optimizer.gatherState(0);
  for (const OptimizerState& slot : optimizer.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;
  for (int step = 0; step < 2; ++step) {
    plain.setGradients(step);
    sharded.setGradients(step);
    reference.step();
    optimizer.step();
  }
  const int root = comm->size() - 1;
  optimizer.gatherState(root);
  const std::vector<OptimizerState> expected = reference.state(), gathered = optimizer.state();
  ASSERT_EQ(gathered.size(), expected.size());
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    EXPECT_EQ(gathered[i].name, expected[i].name);
    EXPECT_EQ(gathered[i].shape, expected[i].shape);
    if (comm->rank() == root) {
      expectSameValues(*gathered[i].tensor, *expected[i].tensor, gathered[i].name);
    } else {
      EXPECT_TRUE(gathered[i].tensor->empty()) << gathered[i].name;
    }
  }
  optimizer.releaseGatheredState();
  for (const OptimizerState& slot : optimizer.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;

  // A restore of no state leaves none (the next step would start afresh)...
  optimizer.clearState();
  optimizer.gatherState(root);
  for (const OptimizerState& slot : optimizer.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;
  // ...and a restore of the whole state (here the reference's, handed to
  // every rank in pieces of 4 elements, which cut across the shards: Note
  // [Restoring a checkpoint from one rank]) keeps each rank's part, without
  // a whole copy: the next step equals the reference's.
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    const std::span<const float> whole = expected[i].tensor->span();
    for (std::size_t begin = 0; begin < whole.size(); begin += 4)
      optimizer.restoreState(gathered[i], begin,
                             whole.subspan(begin, std::min<std::size_t>(4, whole.size() - begin)));
  }
  for (const OptimizerState& slot : optimizer.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;  // the whole form stays empty
  plain.setGradients(7);
  sharded.setGradients(7);
  reference.step();
  optimizer.step();
  for (std::size_t i = 0; i < plain.owned.size(); ++i)
    expectSameValues(plain.owned[i]->value, sharded.owned[i]->value, plain.owned[i]->name);
}

// --checkpoint-staging copy: the root gathers each checkpoint into the last
// one's memory once the writer has let go of it (no page faulted in again),
// and into new memory while a snapshot of it is still held; every gather
// holds that step's state, not the last one's.
TEST(ShardedOptimizer, GathersIntoTheLastBufferOnceNothingHoldsIt) {
  auto comm = comm::makeTestComm();
  Model plain, sharded;
  AdamW reference(plain.parameters(), kAdamW);
  ShardedOptimizer optimizer(*comm, sharded.parameters(), makeAdamW);
  int step = 0;
  // Two more steps, then a gather: the root's first state tensor's memory.
  const auto stepAndGather = [&]() -> const float* {
    for (int i = 0; i < 2; ++i, ++step) {
      plain.setGradients(step);
      sharded.setGradients(step);
      reference.step();
      optimizer.step();
    }
    optimizer.gatherState(0);
    std::map<std::string, const Tensor*> expected;  // by name: the orders differ
    for (const OptimizerState& slot : reference.state())
      expected[slot.name] = slot.tensor;
    const float* first = nullptr;
    for (const OptimizerState& slot : optimizer.state()) {
      if (comm->rank() != 0) continue;
      if (!expected.contains(slot.name)) {
        ADD_FAILURE() << "no " << slot.name << " in the reference";
        continue;
      }
      expectSameValues(*slot.tensor, *expected[slot.name], slot.name);
      if (slot.snapshot && first == nullptr) first = slot.tensor->data();
    }
    return first;
  };
  const float* firstBuffer = stepAndGather();
  Tensor held;  // a writer still holding the first checkpoint's snapshot
  for (const OptimizerState& slot : optimizer.state())
    if (slot.snapshot && held.empty()) held = *slot.tensor;
  optimizer.releaseGatheredState();
  const float* secondBuffer = stepAndGather();
  held = Tensor();  // written
  optimizer.releaseGatheredState();
  const float* thirdBuffer = stepAndGather();
  if (comm->rank() != 0) return;
  ASSERT_NE(firstBuffer, nullptr);
  EXPECT_NE(secondBuffer, firstBuffer);  // held: new memory
  EXPECT_EQ(thirdBuffer, secondBuffer);  // let go: the same memory again
}

// A shard larger than a gather piece (kGatherPieceBytes from all ranks at
// the root: 1.2 M elements give every world size here two or more pieces,
// which the parameters' slices cut across) is gathered whole, bit for bit.
TEST(ShardedOptimizer, GathersAShardLargerThanAPieceInPieces) {
  auto comm = comm::makeTestComm();
  const std::vector<Shape> shapes = {{1100, 1000}, {1000}, {3, 7}};
  Model plain(shapes), sharded(shapes);
  const SgdOptions options{0.1f, 0.9f, 0.0f, false, false};
  Sgd reference(plain.parameters(), options);
  ShardedOptimizer optimizer(*comm, sharded.parameters(),
                             [&](std::vector<Parameter*> parameters) -> std::unique_ptr<Optimizer> {
                               return std::make_unique<Sgd>(std::move(parameters), options);
                             });
  const std::size_t perRank =
      kGatherPieceBytes / sizeof(float) / static_cast<std::size_t>(comm->size());
  ASSERT_GT(optimizer.layout().shardElements, perRank) << "one piece: the test tests nothing";
  for (int step = 0; step < 2; ++step) {
    plain.setGradients(step);
    sharded.setGradients(step);
    reference.step();
    optimizer.step();
  }
  optimizer.gatherState(0);
  const std::vector<OptimizerState> expected = reference.state(), gathered = optimizer.state();
  ASSERT_EQ(gathered.size(), expected.size());
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    if (comm->rank() == 0) {
      expectSameValues(*gathered[i].tensor, *expected[i].tensor, gathered[i].name);
    } else {
      EXPECT_TRUE(gathered[i].tensor->empty()) << gathered[i].name;
    }
  }
}

// Note [Streaming a sharded optimizer's state]: the root is handed every
// element of every slot that exists exactly once, with the unsharded
// optimizer's values, in pieces no larger than what it receives at a time,
// and keeps none of it; before the first step nothing exists and nothing is
// handed over. A sink that throws stops the delivery, not the collective:
// every rank gets through it, the root rethrows, and the ranks go on to the
// next collective together.
TEST(ShardedOptimizer, StreamsEveryElementOnceToTheRootAndKeepsNone) {
  auto comm = comm::makeTestComm();
  const std::vector<Shape> shapes = {{1100, 1000}, {1000}, {3, 7}};
  Model plain(shapes), sharded(shapes);
  AdamW reference(plain.parameters(), AdamWOptions{});
  ShardedOptimizer optimizer(*comm, sharded.parameters(),
                             [](std::vector<Parameter*> parameters) -> std::unique_ptr<Optimizer> {
                               return std::make_unique<AdamW>(std::move(parameters),
                                                              AdamWOptions{});
                             });
  const int root = comm->size() - 1;
  const bool atRoot = comm->rank() == root;
  std::size_t calls = 0;
  optimizer.streamState(root, [&](std::size_t, std::size_t, std::span<const float>) { ++calls; });
  EXPECT_EQ(calls, 0u) << "state streamed before it exists";
  for (const OptimizerState& slot : optimizer.state())
    EXPECT_FALSE(slot.onShards) << slot.name;
  for (int step = 0; step < 2; ++step) {
    plain.setGradients(step);
    sharded.setGradients(step);
    reference.step();
    optimizer.step();
  }
  const std::vector<OptimizerState> slots = optimizer.state();
  std::map<std::string, const Tensor*> expected;  // AdamW lists its state in another order
  for (const OptimizerState& slot : reference.state())
    expected[slot.name] = slot.tensor;
  std::vector<std::vector<float>> received(slots.size());
  std::vector<std::vector<int>> times(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].onShards) continue;  // AdamW's step, replicated
    received[i].resize(numelOf(slots[i].shape));
    times[i].resize(received[i].size());
  }
  std::size_t largest = 0;
  optimizer.streamState(
      root, [&](std::size_t slot, std::size_t begin, std::span<const float> values) {
        ASSERT_LT(slot, slots.size());
        ASSERT_TRUE(slots[slot].onShards) << slots[slot].name;
        ASSERT_LE(begin + values.size(), received[slot].size()) << slots[slot].name;
        std::copy(values.begin(), values.end(), received[slot].begin() + begin);
        for (std::size_t j = 0; j < values.size(); ++j)
          ++times[slot][begin + j];
        largest = std::max(largest, values.size());
      });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].onShards) continue;  // AdamW's step, held by every rank
    EXPECT_TRUE(slots[i].tensor->empty()) << slots[i].name << ": kept";
    if (!atRoot) continue;
    ASSERT_TRUE(expected.contains(slots[i].name)) << slots[i].name;
    EXPECT_TRUE(std::all_of(times[i].begin(), times[i].end(), [](int n) { return n == 1; }))
        << slots[i].name << ": an element handed over twice or never";
    const Tensor got = Tensor::view(received[i].data(), slots[i].shape, nullptr);
    expectSameValues(got, *expected.at(slots[i].name), slots[i].name);
  }
  if (atRoot) {
    EXPECT_GT(largest, 0u);
    EXPECT_LE(largest * sizeof(float), kGatherPieceBytes / static_cast<std::size_t>(comm->size()));
  } else {
    EXPECT_EQ(largest, 0u) << "delivered on a rank other than the root";
  }

  calls = 0;
  bool threw = false;
  try {
    optimizer.streamState(root, [&](std::size_t, std::size_t, std::span<const float>) {
      ++calls;
      throw DataError("the disk is full");
    });
  } catch (const DataError& e) {
    threw = true;
    EXPECT_STREQ(e.what(), "the disk is full");
  }
  EXPECT_EQ(threw, atRoot);
  EXPECT_EQ(calls, atRoot ? 1u : 0u) << "delivered on after the sink threw";
  optimizer.gatherState(root);  // the ranks are still in step
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (atRoot && slots[i].onShards)
      expectSameValues(*slots[i].tensor, *expected.at(slots[i].name), slots[i].name);
  }
}

}  // namespace
}  // namespace ddp::trainer
