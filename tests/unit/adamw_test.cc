// AdamW against closed forms of PyTorch's rule (trainer/adamw.h): the bias
// corrections make the first step, and every step of a constant gradient,
// move each weight by lr * g / (|g| + eps); decoupled decay alone shrinks the
// weights geometrically; and the state a checkpoint holds.
#include "trainer/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ddp::trainer {
namespace {

Parameter vectorParameter(std::vector<float> values, std::vector<float> grads,
                          std::string name = "p") {
  Parameter p{std::move(name), Tensor({values.size()}), Tensor({values.size()}), true};
  std::copy(values.begin(), values.end(), p.value.data());
  std::copy(grads.begin(), grads.end(), p.grad.data());
  return p;
}

// m-hat = g and v-hat = g^2 on the first step, whatever the betas.
TEST(AdamW, FirstStepMovesEachWeightByLrTimesTheGradientsSign) {
  const float lr = 0.01f, eps = 1e-8f;
  Parameter p = vectorParameter({1.0f, -2.0f, 0.5f, 3.0f}, {0.3f, -4.0f, 1e-3f, 0.0f});
  AdamW adamw({&p}, {lr, 0.9f, 0.999f, eps, 0.0f});
  adamw.step();
  const float g[] = {0.3f, -4.0f, 1e-3f, 0.0f}, before[] = {1.0f, -2.0f, 0.5f, 3.0f};
  for (int j = 0; j < 4; ++j) {
    const double expected = before[j] - lr * g[j] / (std::fabs(g[j]) + eps);
    EXPECT_NEAR(p.value.data()[j], expected, 2e-7) << j;
  }
}

// With bias correction, a constant gradient gives m-hat = g and v-hat = g^2
// at every step, so k steps move a weight by k * lr * sign(g).
TEST(AdamW, AConstantGradientMovesAtTheLearningRateEveryStep) {
  const float lr = 0.001f;
  Parameter p = vectorParameter({0.5f, -0.5f}, {2.0f, -0.25f});
  AdamW adamw({&p}, {lr, 0.9f, 0.999f, 1e-8f, 0.0f});
  for (int k = 1; k <= 20; ++k) {
    adamw.step();
    EXPECT_NEAR(p.value.data()[0], 0.5f - k * lr, 2e-6) << "step " << k;
    EXPECT_NEAR(p.value.data()[1], -0.5f + k * lr, 2e-6) << "step " << k;
  }
}

// The decay is decoupled: with no gradient the moments stay 0 and each step
// only multiplies the weight by 1 - lr * weight_decay (Adam's L2 penalty
// would instead pass through the moments and move it by about lr).
TEST(AdamW, WeightDecayIsDecoupledFromTheMoments) {
  const float lr = 0.1f, wd = 0.5f;
  Parameter p = vectorParameter({2.0f}, {0.0f});
  AdamW adamw({&p}, {lr, 0.9f, 0.999f, 1e-8f, wd});
  for (int k = 1; k <= 5; ++k) {
    adamw.step();
    EXPECT_FLOAT_EQ(p.value.data()[0], 2.0f * std::pow(1.0f - lr * wd, static_cast<float>(k)));
  }
}

// Two different gradients: the second step by hand, from PyTorch's formula.
TEST(AdamW, SecondStepFollowsPytorchsFormula) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  Parameter p = vectorParameter({1.0f}, {0.5f});
  AdamW adamw({&p}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.1f});
  double value = 1.0, m = 0.0, v = 0.0;
  for (int t = 1; t <= 2; ++t) {
    const double g = t == 1 ? 0.5 : -1.5;
    p.grad.data()[0] = static_cast<float>(g);
    adamw.step();
    value *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    value -= lr / (1 - std::pow(b1, t)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps);
    EXPECT_NEAR(p.value.data()[0], value, 1e-6) << "step " << t;
  }
}

// Clipping's scale multiplies the gradient as it is read: a step with scale
// s on gradient g equals a step on gradient s * g.
TEST(AdamW, AGradientScaleIsAScaledGradient) {
  Parameter scaled = vectorParameter({1.0f, 2.0f}, {0.8f, -0.4f});
  Parameter plain = vectorParameter({1.0f, 2.0f}, {0.2f, -0.1f});
  AdamW a({&scaled}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f});
  AdamW b({&plain}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f});
  for (int k = 0; k < 3; ++k) {
    a.step({.gradScale = 0.25f});
    b.step();
  }
  for (int j = 0; j < 2; ++j)
    EXPECT_EQ(scaled.value.data()[j], plain.value.data()[j]) << j;
}

TEST(AdamW, FrozenParametersDoNotMoveAndHaveNoState) {
  Parameter trained = vectorParameter({1.0f}, {0.5f}, "a");
  Parameter frozen = vectorParameter({1.0f}, {0.5f}, "b");
  frozen.trainable = false;
  AdamW adamw({&trained, &frozen}, {0.1f, 0.9f, 0.999f, 1e-8f, 0.1f});
  adamw.step();
  EXPECT_EQ(frozen.value.data()[0], 1.0f);
  EXPECT_NE(trained.value.data()[0], 1.0f);
  std::vector<std::string> names;
  for (const OptimizerState& slot : adamw.state())
    names.push_back(slot.name);
  EXPECT_EQ(names, (std::vector<std::string>{"exp_avg.a", "exp_avg_sq.a", "step"}));
}

// Note [Optimizer state in checkpoints]: empty before the first step, then
// the moments and the step count as PyTorch's state_dict holds them.
TEST(AdamW, StateIsCreatedByTheFirstStepAndCountsSteps) {
  Parameter p = vectorParameter({1.0f, 2.0f}, {0.5f, -1.0f}, "w");
  AdamW adamw({&p}, {0.1f, 0.9f, 0.999f, 1e-8f, 0.0f});
  for (const OptimizerState& slot : adamw.state())
    EXPECT_TRUE(slot.tensor->empty()) << slot.name;
  adamw.step();
  adamw.step();
  const std::vector<OptimizerState> state = adamw.state();
  ASSERT_EQ(state.size(), 3u);
  // After two steps of the same gradient g: m = (1 - 0.9^2) g, v = (1 - 0.999^2) g^2.
  EXPECT_FLOAT_EQ(state[0].tensor->data()[1], (1 - 0.81f) * -1.0f);
  EXPECT_NEAR(state[1].tensor->data()[1], 1 - 0.999 * 0.999, 1e-7);  // 1 - 0.999f: 5e-5 off
  EXPECT_EQ(state[2].shape, (Shape{1}));
  EXPECT_EQ(state[2].tensor->data()[0], 2.0f);
}

// A restored state continues where it stopped: two steps, then a copy of
// the weights and state taken into a fresh optimizer, then a third step on
// each, give the same bits.
TEST(AdamW, RestoredStateContinuesExactly) {
  Parameter a = vectorParameter({1.0f, -1.0f}, {0.5f, 0.25f});
  AdamW first({&a}, {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f});
  first.step();
  first.step();
  Parameter b = vectorParameter({a.value.data()[0], a.value.data()[1]}, {0.5f, 0.25f});
  AdamW second({&b}, {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f});
  const std::vector<OptimizerState> from = first.state(), to = second.state();
  for (std::size_t i = 0; i < from.size(); ++i) {
    *to[i].tensor = Tensor(to[i].shape);
    to[i].tensor->copyFrom(*from[i].tensor);
  }
  first.step();
  second.step();
  EXPECT_EQ(a.value.data()[0], b.value.data()[0]);
  EXPECT_EQ(a.value.data()[1], b.value.data()[1]);
}

// --no-bias-decay: with no gradient only the weight matrix shrinks.
TEST(AdamW, WithoutBiasDecayOnlyMatricesDecay) {
  Parameter weight{"w", Tensor({1, 2}), Tensor({1, 2}), true};
  weight.value.fill(2.0f);
  Parameter bias = vectorParameter({2.0f}, {0.0f}, "b");
  AdamW adamw({&weight, &bias}, {0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, false});
  adamw.step();
  EXPECT_FLOAT_EQ(weight.value.data()[1], 2.0f * (1.0f - 0.1f * 0.5f));
  EXPECT_EQ(bias.value.data()[0], 2.0f);
}

}  // namespace
}  // namespace ddp::trainer
