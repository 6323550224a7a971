#include "trainer/mlp.h"

#include <cblas.h>

#include "runtime/str.h"
#include "trainer/linear.h"
#include "trainer/relu.h"

namespace ddp::trainer {

std::unique_ptr<Sequential> buildMlp(std::size_t inputDim, const std::vector<std::size_t>& hidden,
                                     std::size_t classes, std::uint64_t seed) {
  auto model = std::make_unique<Sequential>();
  std::size_t in = inputDim;
  auto addLinear = [&](std::size_t out) {
    const std::size_t index = model->size();
    model->add(std::make_unique<Linear>(in, out, str("layers.", index, "."), seed + index));
    in = out;
  };
  for (std::size_t width : hidden) {
    addLinear(width);
    model->add(std::make_unique<Relu>());
  }
  addLinear(classes);
  return model;
}

std::vector<std::size_t> mlpParameterCounts(std::size_t inputDim,
                                            const std::vector<std::size_t>& hidden,
                                            std::size_t classes) {
  std::vector<std::size_t> counts;
  std::size_t in = inputDim;
  for (std::size_t width : hidden) {
    counts.push_back(in * width + width);  // Linear: weight and bias
    counts.push_back(0);                   // ReLU
    in = width;
  }
  counts.push_back(in * classes + classes);
  return counts;
}

void setBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace ddp::trainer
