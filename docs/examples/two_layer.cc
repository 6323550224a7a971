// A complete data-parallel training program on ddp's comm layer and Reducer,
// with a hand-written two-layer model (no ddp trainer types).
//
//   mpirun -np 4 two_layer
//
// Every rank fits y = sum(x) / dim on its own random samples. Gradients live
// in Reducer storage; each layer's backward marks them ready, which starts
// their bucket's all-reduce while the other layer's backward still runs.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/reducer.h"
#include "runtime/world.h"

int main() {
  ddp::World world;  // MPI start-up; rank, size, node layout
  ddp::comm::MpiCommunicator comm(world.comm(), {});
  constexpr std::size_t kIn = 32, kHidden = 64, kBatch = 16;

  // Parameters, in registration order: w1 [hidden x in], w2 [hidden].
  std::vector<float> w1(kHidden * kIn), w2(kHidden);
  std::mt19937 init(7);  // the same seed everywhere; broadcasting would do too
  std::normal_distribution<float> normal(0.0f, 0.2f);
  for (float& w : w1)
    w = normal(init);
  for (float& w : w2)
    w = normal(init);

  // The Reducer owns the gradients; it checks that all ranks built the same buckets.
  ddp::comm::Reducer reducer(comm, {{"w1", w1.size()}, {"w2", w2.size()}}, {});
  std::span<float> g1 = reducer.gradient(0), g2 = reducer.gradient(1);

  std::mt19937 data(100 + world.rank());  // each rank its own shard
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(kIn), h(kHidden);
  float firstLoss = 0, loss = 0;
  for (int step = 0; step < 300; ++step) {
    std::fill(g1.begin(), g1.end(), 0.0f);
    std::fill(g2.begin(), g2.end(), 0.0f);
    reducer.prepareForBackward();
    loss = 0;
    // Forward and backward of the output layer, sample by sample.
    std::vector<std::vector<float>> inputs, hidden;
    std::vector<float> dy;
    for (std::size_t s = 0; s < kBatch; ++s) {
      float target = 0, y = 0;
      for (float& v : x)
        target += (v = uniform(data)) / kIn;
      for (std::size_t j = 0; j < kHidden; ++j) {
        float z = 0;
        for (std::size_t i = 0; i < kIn; ++i)
          z += w1[j * kIn + i] * x[i];
        h[j] = z > 0 ? z : 0;  // ReLU
        y += w2[j] * h[j];
      }
      loss += (y - target) * (y - target) / kBatch;
      dy.push_back(2 * (y - target) / kBatch);
      inputs.push_back(x);
      hidden.push_back(h);
      for (std::size_t j = 0; j < kHidden; ++j)
        g2[j] += dy.back() * h[j];
    }
    reducer.markReady(1);  // w2's gradient is final: its bucket may start
    for (std::size_t s = 0; s < kBatch; ++s) {
      for (std::size_t j = 0; j < kHidden; ++j) {
        if (hidden[s][j] <= 0) continue;
        for (std::size_t i = 0; i < kIn; ++i)
          g1[j * kIn + i] += dy[s] * w2[j] * inputs[s][i];
      }
    }
    reducer.markReady(0);
    reducer.finalize();  // every gradient now holds the mean over ranks
    for (std::size_t k = 0; k < w1.size(); ++k)
      w1[k] -= 0.05f * g1[k];
    for (std::size_t k = 0; k < w2.size(); ++k)
      w2[k] -= 0.05f * g2[k];
    if (step == 0) firstLoss = loss;
  }

  // The replicas must be identical: compare each weight's min and max over ranks.
  std::vector<float> low(w1), high(w1);
  comm.allreduceSync(std::span<float>(low), ddp::comm::ReduceOp::kMin);
  comm.allreduceSync(std::span<float>(high), ddp::comm::ReduceOp::kMax);
  const bool identical = low == high;
  const bool learned = loss < 0.5f * firstLoss;
  if (world.rank() == 0) {
    std::printf("two_layer: %d ranks, loss %.4f -> %.4f, replicas %s\n", world.size(), firstLoss,
                loss, identical ? "identical" : "DIFFERENT");
  }
  return identical && learned ? 0 : 1;
}
