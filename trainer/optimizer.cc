#include "trainer/optimizer.h"

namespace ddp::trainer {

void Optimizer::restoreState(const OptimizerState& slot, std::size_t begin,
                             std::span<const float> values) {
  if (begin == 0) *slot.tensor = Tensor(slot.shape, slot.device);
  slot.tensor->copyFromHost(begin, values);
}

void Optimizer::clearState() {
  for (const OptimizerState& slot : state())
    *slot.tensor = Tensor();
}

}  // namespace ddp::trainer
