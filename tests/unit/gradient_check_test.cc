// Every layer's backward and the loss against central finite differences.
//
// For a layer f we check the scalar L = sum(f(x) * R) with fixed random R, so
// dL/dy = R and the analytic gradients come from backward(R). Differences are
// taken in double around float parameters with a step large enough that float
// rounding stays far below the tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "trainer/cross_entropy.h"
#include "trainer/linear.h"
#include "trainer/random.h"
#include "trainer/relu.h"
#include "trainer/sequential.h"

namespace ddp::trainer {
namespace {

constexpr float kStep = 1e-2f;
constexpr double kTolerance = 2e-3;  // relative to the largest gradient

Tensor randomTensor(Shape shape, std::uint64_t seed, float scale = 1.0f) {
  Tensor t(std::move(shape));
  Random random(seed);
  for (float& v : t.span())
    v = scale * random.normal();
  return t;
}

double dot(const Tensor& a, const Tensor& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.numel(); ++i)
    sum += static_cast<double>(a.data()[i]) * b.data()[i];
  return sum;
}

// Compares `analytic` with central differences of `objective` wrt `values`.
void expectMatchesFiniteDifferences(Tensor& values, const Tensor& analytic,
                                    const std::function<double()>& objective,
                                    const std::string& what) {
  ASSERT_EQ(values.shape(), analytic.shape()) << what;
  double largest = 1e-6;
  for (float g : analytic.span())
    largest = std::max(largest, std::abs(static_cast<double>(g)));
  for (std::size_t i = 0; i < values.numel(); ++i) {
    const float saved = values.data()[i];
    values.data()[i] = saved + kStep;
    const double plus = objective();
    values.data()[i] = saved - kStep;
    const double minus = objective();
    values.data()[i] = saved;
    const double numeric = (plus - minus) / (2.0 * kStep);
    ASSERT_NEAR(analytic.data()[i], numeric, kTolerance * largest) << what << " element " << i;
  }
}

TEST(GradientCheck, LinearWeightBiasAndInput) {
  Linear layer(5, 4, "layers.0.", 11);
  Tensor x = randomTensor({3, 5}, 1);
  const Tensor r = randomTensor({3, 4}, 2);
  auto objective = [&] { return dot(layer.forward(x), r); };
  objective();
  const Tensor dx = layer.backward(r, GradMode::kOverwrite, true)->clone();
  auto params = layer.parameters();
  const Tensor dw = params[0]->grad.clone(), db = params[1]->grad.clone();
  expectMatchesFiniteDifferences(params[0]->value, dw, objective, "weight");
  expectMatchesFiniteDifferences(params[1]->value, db, objective, "bias");
  expectMatchesFiniteDifferences(x, dx, objective, "input");
}

TEST(GradientCheck, LinearWithoutInputGradientReturnsNull) {
  Linear layer(3, 2, "l.", 1);
  Tensor x = randomTensor({2, 3}, 3);
  layer.forward(x);
  EXPECT_EQ(layer.backward(randomTensor({2, 2}, 4), GradMode::kOverwrite, false), nullptr);
}

TEST(GradientCheck, LinearAccumulateAddsToExistingGradients) {
  Linear layer(4, 3, "l.", 5);
  Tensor x = randomTensor({2, 4}, 6);
  const Tensor r = randomTensor({2, 3}, 7);
  layer.forward(x);
  layer.backward(r, GradMode::kOverwrite, false);
  const Tensor once = layer.parameters()[0]->grad.clone();
  const Tensor onceBias = layer.parameters()[1]->grad.clone();
  layer.forward(x);
  layer.backward(r, GradMode::kAccumulate, false);
  for (std::size_t i = 0; i < once.numel(); ++i) {
    EXPECT_FLOAT_EQ(layer.parameters()[0]->grad.data()[i], 2 * once.data()[i]);
  }
  for (std::size_t i = 0; i < onceBias.numel(); ++i) {
    EXPECT_FLOAT_EQ(layer.parameters()[1]->grad.data()[i], 2 * onceBias.data()[i]);
  }
}

TEST(GradientCheck, LinearForwardIsXWTransposedPlusBias) {
  Linear layer(2, 2, "l.", 1);
  auto params = layer.parameters();
  const float w[] = {1, 2, 3, 4}, b[] = {10, 20};
  std::copy(w, w + 4, params[0]->value.data());
  std::copy(b, b + 2, params[1]->value.data());
  Tensor x({1, 2});
  x.data()[0] = 1;
  x.data()[1] = -1;
  const Tensor& y = layer.forward(x);
  EXPECT_FLOAT_EQ(y.data()[0], 10 + 1 * 1 + 2 * -1);
  EXPECT_FLOAT_EQ(y.data()[1], 20 + 3 * 1 + 4 * -1);
}

TEST(GradientCheck, Relu) {
  Relu layer;
  // Keep inputs away from the kink at 0, where the derivative is undefined.
  Tensor x = randomTensor({4, 6}, 8);
  for (float& v : x.span())
    v += v >= 0 ? 0.1f : -0.1f;
  const Tensor r = randomTensor({4, 6}, 9);
  auto objective = [&] { return dot(layer.forward(x), r); };
  objective();
  const Tensor dx = layer.backward(r, GradMode::kOverwrite, true)->clone();
  expectMatchesFiniteDifferences(x, dx, objective, "input");
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  SoftmaxCrossEntropy loss;
  Tensor logits = randomTensor({5, 4}, 10, 2.0f);
  const std::vector<std::int32_t> labels = {0, 3, 1, 1, 2};
  auto objective = [&] { return loss.forward(logits, labels).loss; };
  objective();
  const Tensor grad = loss.backward().clone();
  expectMatchesFiniteDifferences(logits, grad, objective, "logits");
}

TEST(GradientCheck, LossScaleScalesTheGradient) {
  SoftmaxCrossEntropy loss;
  Tensor logits = randomTensor({3, 4}, 12);
  const std::vector<std::int32_t> labels = {1, 2, 3};
  loss.forward(logits, labels);
  const Tensor full = loss.backward(1.0f).clone();
  const Tensor& quarter = loss.backward(0.25f);
  for (std::size_t i = 0; i < full.numel(); ++i)
    EXPECT_FLOAT_EQ(quarter.data()[i], 0.25f * full.data()[i]);
}

TEST(CrossEntropy, KnownValuesAndAccuracy) {
  SoftmaxCrossEntropy loss;
  Tensor logits({2, 2});
  // Row 0: equal logits -> loss log 2. Row 1: logit 0 and log 3 -> p(1) = 3/4.
  logits.data()[2] = 0.0f;
  logits.data()[3] = std::log(3.0f);
  const std::vector<std::int32_t> labels = {0, 1};
  const LossResult result = loss.forward(logits, labels);
  EXPECT_NEAR(result.loss, (std::log(2.0) - std::log(0.75)) / 2, 1e-6);
  EXPECT_EQ(result.correct, 2u);  // row 0 ties: arg-max picks the first class, the label
}

TEST(CrossEntropy, HugeLogitsStayFinite) {
  SoftmaxCrossEntropy loss;
  Tensor logits({1, 3});
  logits.data()[0] = 1000.0f;
  logits.data()[1] = -1000.0f;
  const std::vector<std::int32_t> labels = {1};
  const LossResult result = loss.forward(logits, labels);
  EXPECT_NEAR(result.loss, 2000.0, 1e-3);
  for (float g : loss.backward().span())
    EXPECT_TRUE(std::isfinite(g));
}

TEST(GradientCheck, WholeMlpThroughSequential) {
  Sequential model;
  model.add(std::make_unique<Linear>(6, 5, "layers.0.", 1));
  model.add(std::make_unique<Relu>());
  model.add(std::make_unique<Linear>(5, 3, "layers.2.", 2));
  SoftmaxCrossEntropy loss;
  Tensor x = randomTensor({4, 6}, 13);
  const std::vector<std::int32_t> labels = {0, 1, 2, 1};
  auto objective = [&] { return loss.forward(model.forward(x), labels).loss; };
  objective();
  model.backward(loss.backward(), GradMode::kOverwrite);
  for (Parameter* p : model.parameters()) {
    const Tensor grad = p->grad.clone();
    expectMatchesFiniteDifferences(p->value, grad, objective, p->name);
  }
}

}  // namespace
}  // namespace ddp::trainer
