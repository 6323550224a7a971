// The models ddp_train can build.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/sequential.h"

namespace ddp::trainer {

// Linear(in, h0) -> ReLU -> Linear(h0, h1) -> ReLU -> ... -> Linear(hk, classes),
// parameters named layers.<i>.weight / layers.<i>.bias as in PyTorch's
// nn.Sequential. Layer i is initialised from seed + i, so the same seed gives
// the same model whatever the world size.
std::unique_ptr<Sequential> buildMlp(std::size_t inputDim, const std::vector<std::size_t>& hidden,
                                     std::size_t classes, std::uint64_t seed);

// The number of parameters of each layer buildMlp(inputDim, hidden, classes)
// builds, by layer index (0 for a ReLU), without building it: for sizing a
// run before any memory is allocated.
std::vector<std::size_t> mlpParameterCounts(std::size_t inputDim,
                                            const std::vector<std::size_t>& hidden,
                                            std::size_t classes);

// Sets the number of BLAS threads this process uses (OpenBLAS). 0 leaves the default.
void setBlasThreads(int threads);

}  // namespace ddp::trainer
