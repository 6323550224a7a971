// What --checkpoint-dir writes for an MLP, for the checkpoint benchmarks: the
// model (784 inputs, `hidden`, 10 classes) and SGD with its momentum buffers,
// made by one step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "trainer/mlp.h"
#include "trainer/sgd.h"

namespace ddp::benchmarks {

struct CheckpointState {
  explicit CheckpointState(const std::vector<std::size_t>& hidden)
      : model(trainer::buildMlp(784, hidden, 10, 1)),
        sgd(model->parameters(), {0.1f, 0.9f, 0.0f, false}) {
    for (trainer::Parameter* p : model->parameters())
      std::fill(p->grad.data(), p->grad.data() + p->grad.numel(), 0.5f);
    sgd.step();  // creates the momentum buffers
  }
  std::unique_ptr<trainer::Sequential> model;
  trainer::Sgd sgd;
};

}  // namespace ddp::benchmarks
