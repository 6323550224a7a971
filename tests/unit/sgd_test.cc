// SGD against PyTorch's update rule, computed by hand.
#include "trainer/sgd.h"

#include <gtest/gtest.h>

namespace ddp::trainer {
namespace {

Parameter scalarParameter(float value, float grad) {
  Parameter p{"p", Tensor({1}), Tensor({1}), true};
  p.value.data()[0] = value;
  p.grad.data()[0] = grad;
  return p;
}

TEST(Sgd, PlainStepIsValueMinusLrTimesGrad) {
  Parameter p = scalarParameter(1.0f, 0.5f);
  Sgd sgd({&p}, {0.1f, 0.0f, 0.0f, false});
  sgd.step();
  EXPECT_FLOAT_EQ(p.value.data()[0], 1.0f - 0.1f * 0.5f);
}

TEST(Sgd, MomentumAndWeightDecayFollowPytorch) {
  const float lr = 0.1f, mu = 0.9f, wd = 0.01f;
  Parameter p = scalarParameter(2.0f, 0.5f);
  Sgd sgd({&p}, {lr, mu, wd, false});
  // step 1: g = 0.5 + 0.01*2 = 0.52; buf = g; p = 2 - 0.1*0.52
  sgd.step();
  float expectedP = 2.0f - lr * 0.52f;
  float buf = 0.52f;
  EXPECT_FLOAT_EQ(p.value.data()[0], expectedP);
  // step 2 with grad 0.3: g = 0.3 + wd*p; buf = mu*buf + g; p -= lr*buf
  p.grad.data()[0] = 0.3f;
  sgd.step();
  const float g = 0.3f + wd * expectedP;
  buf = mu * buf + g;
  expectedP -= lr * buf;
  EXPECT_FLOAT_EQ(p.value.data()[0], expectedP);
  EXPECT_FLOAT_EQ(sgd.momentumBuffers()[0].data()[0], buf);
}

TEST(Sgd, NesterovUsesGradientPlusMomentumTimesBuffer) {
  Parameter p = scalarParameter(1.0f, 1.0f);
  Sgd sgd({&p}, {0.1f, 0.5f, 0.0f, true});
  sgd.step();  // buf = 1; update = g + mu*buf = 1.5
  EXPECT_FLOAT_EQ(p.value.data()[0], 1.0f - 0.1f * 1.5f);
}

// Clipping's scale multiplies the gradient before weight decay and momentum
// (PyTorch clips the .grad the optimizer then reads).
TEST(Sgd, AGradientScaleAppliesBeforeWeightDecayAndMomentum) {
  const float lr = 0.1f, mu = 0.9f, wd = 0.01f, scale = 0.25f;
  Parameter p = scalarParameter(2.0f, 0.5f);
  Sgd sgd({&p}, {lr, mu, wd, false});
  sgd.step({.gradScale = scale});
  float g = 0.5f * scale + wd * 2.0f;
  float expectedP = 2.0f - lr * g;
  float buf = g;
  EXPECT_FLOAT_EQ(p.value.data()[0], expectedP);
  p.grad.data()[0] = 0.3f;
  sgd.step({.gradScale = scale});
  g = 0.3f * scale + wd * expectedP;
  buf = mu * buf + g;
  expectedP -= lr * buf;
  EXPECT_FLOAT_EQ(p.value.data()[0], expectedP);

  Parameter plain = scalarParameter(1.0f, 0.5f);
  Sgd noMomentum({&plain}, {lr, 0.0f, 0.0f, false});
  noMomentum.step({.gradScale = scale});
  EXPECT_FLOAT_EQ(plain.value.data()[0], 1.0f - lr * 0.5f * scale);
}

// A scale of 1 is the unclipped update bit for bit.
TEST(Sgd, AScaleOfOneChangesNothing) {
  Parameter a = scalarParameter(1.2345f, 0.6789f), b = scalarParameter(1.2345f, 0.6789f);
  Sgd sa({&a}, {0.1f, 0.9f, 1e-4f, false}), sb({&b}, {0.1f, 0.9f, 1e-4f, false});
  for (int i = 0; i < 3; ++i) {
    sa.step();
    sb.step({.gradScale = 1.0f});
  }
  EXPECT_EQ(a.value.data()[0], b.value.data()[0]);
}

TEST(Sgd, FrozenParametersDoNotMove) {
  Parameter p = scalarParameter(1.0f, 1.0f);
  p.trainable = false;
  Sgd sgd({&p}, {0.1f, 0.9f, 0.1f, false});
  sgd.step();
  EXPECT_EQ(p.value.data()[0], 1.0f);
}

// --no-bias-decay: the 1-D parameters (biases) get no weight decay, the
// others the full amount (weightDecayOf in trainer/optimizer.h).
TEST(Sgd, WithoutBiasDecayOnlyMatricesDecay) {
  Parameter weight{"w", Tensor({1, 1}), Tensor({1, 1}), true};
  Parameter bias = scalarParameter(2.0f, 0.0f);
  weight.value.data()[0] = 2.0f;
  Sgd sgd({&weight, &bias}, {0.1f, 0.0f, 0.5f, false, false});
  sgd.step();
  EXPECT_FLOAT_EQ(weight.value.data()[0], 2.0f - 0.1f * 0.5f * 2.0f);
  EXPECT_EQ(bias.value.data()[0], 2.0f);
}

}  // namespace
}  // namespace ddp::trainer
