// Every CUDA layer, the loss and the optimizer against the CPU implementation
// (the reference) on random inputs.
//
// Each comparison runs the same computation on a CPU copy and a CUDA copy of
// the same layer. Device outputs are poisoned first (NaN), so a kernel that
// skips an element cannot pass by leaving an old value: gradients are filled
// with NaN before an overwriting backward, and every layer first runs a
// forward and backward on NaN inputs so its activation buffers hold NaN.
#include "trainer/cuda/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "comm/finite.h"
#include "runtime/cuda/memory.h"
#include "trainer/adamw.h"
#include "trainer/clip.h"
#include "trainer/cross_entropy.h"
#include "trainer/linear.h"
#include "trainer/random.h"
#include "trainer/relu.h"
#include "trainer/sgd.h"

namespace ddp::trainer {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor randomTensor(Shape shape, std::uint64_t seed) {
  Tensor t(std::move(shape));
  Random random(seed);
  for (float& v : t.span())
    v = random.normal();
  return t;
}

// |gpu - cpu| <= tolerance x max(1, |cpu|) for every element, no NaN anywhere.
void expectClose(const Tensor& cpu, const Tensor& gpu, double tolerance, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  ASSERT_FALSE(cpu.onCuda()) << what;
  const Tensor device = gpu.to(Device::kCpu);
  for (std::size_t i = 0; i < cpu.numel(); ++i) {
    const double expected = cpu.data()[i], actual = device.data()[i];
    ASSERT_FALSE(std::isnan(actual)) << what << " element " << i << " was never written";
    ASSERT_NEAR(actual, expected, tolerance * std::max(1.0, std::abs(expected)))
        << what << " element " << i;
  }
}

struct LinearCase {
  std::size_t batch, in, out;
};

class LinearOnGpu : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearOnGpu, ForwardAndBackwardMatchTheCpu) {
  const auto [batch, in, out] = GetParam();
  Linear cpu(in, out, "layers.0.", 7), gpu(in, out, "layers.0.", 7);
  for (Parameter* p : gpu.parameters()) {
    p->value = p->value.to(Device::kCuda);
    p->grad = Tensor(p->value.shape(), Device::kCuda);
  }
  const Tensor x = randomTensor({batch, in}, 1);
  const Tensor dy = randomTensor({batch, out}, 2);
  const Tensor xGpu = x.to(Device::kCuda), dyGpu = dy.to(Device::kCuda);

  Tensor poison({batch, in}, Device::kCuda);
  poison.fill(kNaN);
  Tensor poisonGrad({batch, out}, Device::kCuda);
  poisonGrad.fill(kNaN);
  gpu.forward(poison);
  gpu.backward(poisonGrad, GradMode::kOverwrite, true);  // every buffer now holds NaN
  for (Parameter* p : gpu.parameters())
    p->grad.fill(kNaN);

  expectClose(cpu.forward(x), gpu.forward(xGpu), 1e-4, "forward");
  const Tensor* dxCpu = cpu.backward(dy, GradMode::kOverwrite, true);
  const Tensor* dxGpu = gpu.backward(dyGpu, GradMode::kOverwrite, true);
  expectClose(*dxCpu, *dxGpu, 1e-4, "input gradient");
  expectClose(cpu.parameters()[0]->grad, gpu.parameters()[0]->grad, 1e-4, "weight gradient");
  expectClose(cpu.parameters()[1]->grad, gpu.parameters()[1]->grad, 1e-4, "bias gradient");

  // Accumulation adds a second micro-batch's gradient to the first.
  const Tensor dy2 = randomTensor({batch, out}, 3);
  cpu.backward(dy2, GradMode::kAccumulate, false);
  EXPECT_EQ(gpu.backward(dy2.to(Device::kCuda), GradMode::kAccumulate, false), nullptr);
  expectClose(cpu.parameters()[0]->grad, gpu.parameters()[0]->grad, 1e-4, "accumulated weight");
  expectClose(cpu.parameters()[1]->grad, gpu.parameters()[1]->grad, 1e-4, "accumulated bias");
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearOnGpu,
                         ::testing::Values(LinearCase{1, 1, 1}, LinearCase{3, 5, 4},
                                           LinearCase{64, 784, 1024}, LinearCase{257, 1024, 10},
                                           LinearCase{4096, 33, 17}));

TEST(ReluOnGpu, ForwardAndBackwardMatchTheCpu) {
  for (std::size_t n : {1ul, 1000ul, 1ul << 20}) {
    Relu cpu, gpu;
    const Tensor x = randomTensor({n, 1}, 4), dy = randomTensor({n, 1}, 5);
    Tensor poison({n, 1}, Device::kCuda);
    poison.fill(kNaN);
    gpu.forward(poison);
    gpu.backward(poison, GradMode::kOverwrite, true);
    expectClose(cpu.forward(x), gpu.forward(x.to(Device::kCuda)), 0.0, "relu forward");
    expectClose(*cpu.backward(dy, GradMode::kOverwrite, true),
                *gpu.backward(dy.to(Device::kCuda), GradMode::kOverwrite, true), 0.0,
                "relu backward");
  }
}

TEST(CrossEntropyOnGpu, LossAccuracyAndGradientMatchTheCpu) {
  for (std::size_t batch : {1ul, 7ul, 1000ul}) {
    for (std::size_t classes : {2ul, 10ul, 45ul}) {
      const Tensor logits = randomTensor({batch, classes}, 6 + batch + classes);
      std::vector<std::int32_t> labels(batch);
      Random random(batch * classes);
      for (auto& label : labels)
        label = static_cast<std::int32_t>(random.below(classes));
      // A tie for the maximum: both sides must pick the first one.
      Tensor tied = logits.clone();
      if (classes > 2) tied.data()[2] = tied.data()[1] = 50.0f;

      SoftmaxCrossEntropy cpu, gpu;
      const LossResult expected = cpu.forward(tied, labels);
      Tensor deviceLabels({batch}, Device::kCuda);  // int32 bits in float storage
      auto* labelBits = reinterpret_cast<const float*>(labels.data());
      Tensor hostLabelBits({batch});
      std::copy(labelBits, labelBits + batch, hostLabelBits.data());
      deviceLabels.copyFrom(hostLabelBits);
      LossTotals totals(Device::kCuda);
      gpu.forward(tied.to(Device::kCuda),
                  reinterpret_cast<const std::int32_t*>(deviceLabels.data()), 2.0, totals);
      const auto [loss, correct] = totals.take();
      EXPECT_NEAR(loss, 2.0 * expected.loss, 1e-5 * std::max(1.0, expected.loss));
      EXPECT_EQ(correct, static_cast<double>(expected.correct));
      EXPECT_EQ(totals.take().first, 0.0) << "take() resets the totals";
      expectClose(cpu.backward(0.5f), gpu.backward(0.5f), 1e-5, "loss gradient");
    }
  }
}

TEST(SgdOnGpu, UpdatesMatchTheCpu) {
  for (const SgdOptions options :
       {SgdOptions{0.1f, 0.0f, 0.0f, false}, SgdOptions{0.05f, 0.9f, 1e-4f, false},
        SgdOptions{0.05f, 0.9f, 1e-3f, true}}) {
    Parameter cpu{"p", randomTensor({1000, 3}, 8), randomTensor({1000, 3}, 9), true};
    Parameter gpu{"p", cpu.value.to(Device::kCuda), cpu.grad.to(Device::kCuda), true};
    Parameter frozen{"f", randomTensor({5}, 10), randomTensor({5}, 11), false};
    const Tensor frozenBefore = frozen.value.clone();
    Sgd cpuSgd({&cpu, &frozen}, options), gpuSgd({&gpu}, options);
    for (int step = 0; step < 3; ++step) {
      cpuSgd.step();
      gpuSgd.step();
      expectClose(cpu.value, gpu.value, 1e-5, "parameters after step " + std::to_string(step));
    }
    expectClose(frozenBefore, frozen.value, 0.0, "frozen parameter");
  }
}

// A device int32 holding `value`, for skip flags.
std::shared_ptr<void> deviceFlag(std::int32_t value) {
  std::shared_ptr<void> flag = ddp::cuda::allocateDevice(sizeof value);
  ddp::cuda::copyToDevice(flag.get(), &value, sizeof value);
  return flag;
}

std::int32_t readFlag(const std::shared_ptr<void>& flag) {
  std::int32_t value = -1;
  ddp::cuda::copyToHost(&value, flag.get(), sizeof value);
  return value;
}

// Note [Skipping a step on the device]: with a flag, the first real update
// must still set the momentum buffer to the gradient, even after skipped
// steps, and a raised flag must leave parameters and momentum untouched.
TEST(SgdOnGpu, ADeviceSkipFlagCancelsTheUpdateAndOtherwiseMatchesTheCpu) {
  for (const SgdOptions options :
       {SgdOptions{0.1f, 0.0f, 0.0f, false}, SgdOptions{0.05f, 0.9f, 1e-4f, false},
        SgdOptions{0.05f, 0.9f, 1e-3f, true}}) {
    Parameter cpu{"p", randomTensor({777}, 20), randomTensor({777}, 21), true};
    Parameter gpu{"p", cpu.value.to(Device::kCuda), cpu.grad.to(Device::kCuda), true};
    Sgd cpuSgd({&cpu}, options), gpuSgd({&gpu}, options);
    const auto skip = deviceFlag(1), go = deviceFlag(0);
    const auto* skipFlag = static_cast<const std::int32_t*>(skip.get());
    const auto* goFlag = static_cast<const std::int32_t*>(go.get());
    gpuSgd.step({.deviceSkip = skipFlag});  // a skipped first step: nothing moves
    expectClose(cpu.value, gpu.value, 0.0, "parameters after a skipped first step");
    for (int step = 0; step < 3; ++step) {
      cpuSgd.step();
      gpuSgd.step({.deviceSkip = goFlag});
      expectClose(cpu.value, gpu.value, 1e-5, "parameters after step " + std::to_string(step));
      const Tensor before = gpu.value.to(Device::kCpu);
      gpuSgd.step({.deviceSkip = skipFlag});  // skipped: parameters and momentum stay
      expectClose(before, gpu.value, 0.0, "parameters after a skipped step");
    }
  }
}

// A device float holding `value`, for gradient scales.
std::shared_ptr<void> deviceFloat(float value) {
  std::shared_ptr<void> memory = ddp::cuda::allocateDevice(sizeof value);
  ddp::cuda::copyToDevice(memory.get(), &value, sizeof value);
  return memory;
}

float readFloat(const void* device) {
  float value = 0.0f;
  ddp::cuda::copyToHost(&value, device, sizeof value);
  return value;
}

TEST(SgdOnGpu, ADeviceGradientScaleMatchesTheCpuScale) {
  for (const SgdOptions options :
       {SgdOptions{0.1f, 0.0f, 0.0f, false}, SgdOptions{0.05f, 0.9f, 1e-3f, true}}) {
    Parameter cpu{"p", randomTensor({1001}, 40), randomTensor({1001}, 41), true};
    Parameter gpu{"p", cpu.value.to(Device::kCuda), cpu.grad.to(Device::kCuda), true};
    Sgd cpuSgd({&cpu}, options), gpuSgd({&gpu}, options);
    const auto scale = deviceFloat(0.3f);
    for (int step = 0; step < 3; ++step) {
      cpuSgd.step({.gradScale = 0.3f});
      gpuSgd.step({.deviceGradScale = static_cast<const float*>(scale.get())});
      expectClose(cpu.value, gpu.value, 1e-5, "parameters after step " + std::to_string(step));
    }
  }
}

// AdamW on the device against the CPU over several steps (the bias
// corrections change every step), with a frozen parameter left alone, skip
// flags that leave parameters, moments and the step count untouched (the
// step count lives on the device: Note [Skipping a step on the device]),
// and a device gradient scale.
TEST(AdamWOnGpu, UpdatesMatchTheCpuAndASkippedStepIsNotCounted) {
  const AdamWOptions options{0.01f, 0.9f, 0.999f, 1e-8f, 0.01f};
  Parameter cpu{"p", randomTensor({1000, 3}, 60), randomTensor({1000, 3}, 61), true};
  Parameter gpu{"p", cpu.value.to(Device::kCuda), cpu.grad.to(Device::kCuda), true};
  Parameter frozen{"f", randomTensor({5}, 62).to(Device::kCuda),
                   randomTensor({5}, 63).to(Device::kCuda), false};
  const Tensor frozenBefore = frozen.value.to(Device::kCpu);
  AdamW cpuAdamW({&cpu}, options), gpuAdamW({&gpu, &frozen}, options);
  const auto skip = deviceFlag(1), go = deviceFlag(0), scale = deviceFloat(0.3f);
  const auto* skipFlag = static_cast<const std::int32_t*>(skip.get());
  const auto* goFlag = static_cast<const std::int32_t*>(go.get());
  gpuAdamW.step({.deviceSkip = skipFlag});  // a skipped first step: nothing moves, t stays 0
  expectClose(cpu.value, gpu.value, 0.0, "parameters after a skipped first step");
  for (int step = 0; step < 4; ++step) {
    const bool scaled = step % 2 == 1;
    cpuAdamW.step({.gradScale = scaled ? 0.3f : 1.0f});
    gpuAdamW.step({.deviceSkip = goFlag,
                   .deviceGradScale = scaled ? static_cast<const float*>(scale.get()) : nullptr});
    expectClose(cpu.value, gpu.value, 1e-5, "parameters after step " + std::to_string(step));
    const Tensor before = gpu.value.to(Device::kCpu);
    gpuAdamW.step({.deviceSkip = skipFlag});
    expectClose(before, gpu.value, 0.0, "parameters after a skipped step");
  }
  const std::vector<OptimizerState> cpuState = cpuAdamW.state(), gpuState = gpuAdamW.state();
  ASSERT_EQ(gpuState.size(), cpuState.size());  // the frozen parameter has none
  for (std::size_t i = 0; i < cpuState.size(); ++i)
    expectClose(*cpuState[i].tensor, *gpuState[i].tensor, 1e-5, gpuState[i].name);
  EXPECT_EQ(gpuState.back().tensor->to(Device::kCpu).data()[0], 4.0f) << "skipped steps counted";
  expectClose(frozenBefore, frozen.value, 0.0, "frozen parameter");
}

// Note [Clipping the averaged gradient]: the device's norm is the host's
// within float rounding, its scale is clipScale's, and a second run gives
// the same bits (no atomics: every rank must get the same scale).
TEST(ClipOnGpu, NormAndScaleMatchTheCpuAndRepeatBitForBit) {
  const std::size_t kScratch = cuda::kNormPartials * sizeof(double) + 2 * sizeof(float);
  const std::shared_ptr<void> scratch = ddp::cuda::allocateDevice(kScratch);
  auto* partials = static_cast<double*>(scratch.get());
  auto* norm = reinterpret_cast<float*>(partials + cuda::kNormPartials);
  float* scale = norm + 1;
  for (const std::size_t count :
       {std::size_t{1}, std::size_t{255}, std::size_t{65539}, std::size_t{1000003}}) {
    const Tensor host = randomTensor({count}, 50 + count);
    const Tensor data = host.to(Device::kCuda);
    const float expected =
        static_cast<float>(std::sqrt(comm::sumOfSquares(host.data(), host.numel())));
    for (const float maxNorm :
         {expected / 3, 2 * expected, std::numeric_limits<float>::infinity()}) {
      cuda::fill(norm, 2, kNaN);  // poisoned: a kernel that writes nothing fails
      cuda::clipByNorm(data.data(), count, maxNorm, partials, norm, scale);
      const float first = readFloat(norm);
      EXPECT_NEAR(first, expected, 1e-6 * expected) << count << " elements";
      EXPECT_NEAR(readFloat(scale), clipScale(expected, maxNorm), 1e-6)
          << count << " elements, limit " << maxNorm;
      cuda::clipByNorm(data.data(), count, maxNorm, partials, norm, scale);
      EXPECT_EQ(readFloat(norm), first) << "not deterministic at " << count << " elements";
    }
  }
  cuda::fill(norm, 2, kNaN);
  cuda::clipByNorm(nullptr, 0, 1.0f, partials, norm, scale);
  EXPECT_EQ(readFloat(norm), 0.0f) << "no gradients: norm 0";
  EXPECT_EQ(readFloat(scale), 1.0f) << "no gradients: nothing to scale";
}

// A sharded run's norm (Note [Reduce-scatter for a sharded optimizer]): each
// rank's part summed on its own, the sums added in part order. Cut into
// parts, the norm is the host's within rounding and repeats bit for bit;
// in one part (a world of one), it is clipByNorm's to the bit.
TEST(ClipOnGpu, NormOfPartsMatchesTheWholeAndOnePartGivesItsBits) {
  constexpr std::size_t kParts = 3;
  const std::size_t kScratch = (cuda::kNormPartials + kParts) * sizeof(double) + 2 * sizeof(float);
  const std::shared_ptr<void> scratch = ddp::cuda::allocateDevice(kScratch);
  auto* partials = static_cast<double*>(scratch.get());
  double* squares = partials + cuda::kNormPartials;
  auto* norm = reinterpret_cast<float*>(squares + kParts);
  float* scale = norm + 1;
  const std::size_t count = 1000003;
  const Tensor host = randomTensor({count}, 77);
  const Tensor data = host.to(Device::kCuda);
  const float expected =
      static_cast<float>(std::sqrt(comm::sumOfSquares(host.data(), host.numel())));
  const float maxNorm = expected / 2;

  // Uneven parts, one of them empty, as a bucket's parts may be.
  const std::size_t bounds[kParts + 1] = {0, 400000, 400000, count};
  cuda::fill(norm, 2, kNaN);
  const std::vector<double> poison(kParts, std::numeric_limits<double>::quiet_NaN());
  ddp::cuda::copyToDevice(squares, poison.data(), kParts * sizeof(double));
  for (std::size_t p = 0; p < kParts; ++p)
    cuda::sumOfSquares(data.data() + bounds[p], bounds[p + 1] - bounds[p], partials, squares + p);
  cuda::clipByNormOfParts(squares, kParts, maxNorm, norm, scale);
  const float split = readFloat(norm);
  EXPECT_NEAR(split, expected, 1e-6 * expected);
  EXPECT_NEAR(readFloat(scale), clipScale(expected, maxNorm), 1e-6);
  cuda::clipByNormOfParts(squares, kParts, maxNorm, norm, scale);
  EXPECT_EQ(readFloat(norm), split) << "the parts' sum is not deterministic";

  cuda::clipByNorm(data.data(), count, maxNorm, partials, norm, scale);
  const float whole = readFloat(norm), wholeScale = readFloat(scale);
  cuda::fill(norm, 2, kNaN);
  cuda::sumOfSquares(data.data(), count, partials, squares);
  cuda::clipByNormOfParts(squares, 1, maxNorm, norm, scale);
  EXPECT_EQ(readFloat(norm), whole) << "one part: not clipByNorm's norm";
  EXPECT_EQ(readFloat(scale), wholeScale) << "one part: not clipByNorm's scale";
}

TEST(NonFiniteOnGpu, AnyNaNOrInfinityRaisesTheFlagAndNothingClearsIt) {
  Tensor data = randomTensor({100003}, 30).to(Device::kCuda);
  const auto flag = deviceFlag(0);
  auto* f = static_cast<std::int32_t*>(flag.get());
  cuda::flagNonFinite(data.data(), data.numel(), f);
  EXPECT_EQ(readFlag(flag), 0) << "finite data raised the flag";
  for (const float bad :
       {kNaN, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    for (const std::size_t at : {std::size_t{0}, std::size_t{4097}, std::size_t{100002}}) {
      Tensor host = randomTensor({100003}, 31);
      host.data()[at] = bad;
      const Tensor poisoned = host.to(Device::kCuda);
      const auto fresh = deviceFlag(0);
      cuda::flagNonFinite(poisoned.data(), poisoned.numel(),
                          static_cast<std::int32_t*>(fresh.get()));
      EXPECT_EQ(readFlag(fresh), 1) << bad << " at " << at << " was missed";
    }
  }
  const auto raised = deviceFlag(1);
  cuda::flagNonFinite(data.data(), data.numel(), static_cast<std::int32_t*>(raised.get()));
  EXPECT_EQ(readFlag(raised), 1) << "finite data cleared a raised flag";
}

TEST(TensorOnGpu, CopiesRoundTripAndFill) {
  const Tensor host = randomTensor({123, 45}, 12);
  const Tensor device = host.to(Device::kCuda);
  EXPECT_TRUE(device.onCuda());
  expectClose(host, device.clone(), 0.0, "device clone");
  Tensor filled({1000}, Device::kCuda);
  filled.fill(3.5f);
  Tensor expected({1000});
  expected.fill(3.5f);
  expectClose(expected, filled, 0.0, "fill");
  // Piece by piece both ways (checkpoints: CheckpointWriter's kDirect out,
  // restoreState in), poisoned first.
  std::vector<float> piece(1000, kNaN);
  device.copyToHost(4000, piece);
  for (std::size_t i = 0; i < piece.size(); ++i)
    ASSERT_EQ(piece[i], host.data()[4000 + i]) << "copyToHost, element " << 4000 + i;
  Tensor target({123, 45}, Device::kCuda);
  target.fill(kNaN);
  for (std::size_t start = 0; start < host.numel(); start += 1000)
    target.copyFromHost(
        start, host.span().subspan(start, std::min<std::size_t>(1000, host.numel() - start)));
  expectClose(host, target, 0.0, "copyFromHost in pieces");
}

}  // namespace
}  // namespace ddp::trainer
