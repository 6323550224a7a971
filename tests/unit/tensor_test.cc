#include "trainer/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/error.h"
#include "trainer/mlp.h"
#include "trainer/random.h"
#include "trainer/sequential.h"

namespace ddp::trainer {
namespace {

TEST(Tensor, OwnsZeroedAlignedStorage) {
  Tensor t({3, 5});
  EXPECT_EQ(t.numel(), 15u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  for (float v : t.span())
    EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, TooLargeForTheHostSaysWhichTensorAndHowMuch) {
  try {
    Tensor t({std::size_t{1} << 30, std::size_t{1} << 30});
    FAIL() << "a 4 EiB tensor was allocated";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "a [1073741824, 1073741824] tensor: cannot allocate 4194304.0 TiB of host memory"),
        std::string::npos)
        << e.what();
  }
}

TEST(Tensor, ViewSharesTheOwnersMemory) {
  auto block = std::make_shared<std::vector<float>>(10, 0.0f);
  Tensor view = Tensor::view(block->data() + 4, {2, 3}, block);
  view.data()[0] = 7.0f;
  EXPECT_EQ((*block)[4], 7.0f);
  std::weak_ptr<std::vector<float>> weak = block;
  block.reset();
  EXPECT_FALSE(weak.expired());  // the view keeps the block alive
}

TEST(Tensor, CopiesShareCloneDoesNot) {
  Tensor a({4});
  Tensor b = a;
  Tensor c = a.clone();
  a.data()[1] = 3.0f;
  EXPECT_EQ(b.data()[1], 3.0f);
  EXPECT_EQ(c.data()[1], 0.0f);
}

TEST(Tensor, CopiesPiecesToAndFromTheHost) {
  Tensor t({3, 4});
  for (std::size_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<float>(i);
  std::vector<float> out(5, -1.0f);
  t.copyToHost(6, out);
  EXPECT_EQ(out, (std::vector<float>{6, 7, 8, 9, 10}));
  EXPECT_THROW(t.copyToHost(8, out), InternalError) << "past the end";
  const std::vector<float> in = {-1, -2};
  t.copyFromHost(10, in);
  EXPECT_EQ(t.data()[10], -1.0f);
  EXPECT_EQ(t.data()[11], -2.0f);
}

TEST(Tensor, ResizeKeepsStorageWhenTheShapeMatches) {
  Tensor t({2, 2});
  float* before = t.data();
  t.resize({2, 2});
  EXPECT_EQ(t.data(), before);
  t.resize({3, 2});
  EXPECT_EQ(t.numel(), 6u);
}

TEST(Sequential, MovingToTheDeviceItIsOnKeepsEveryTensor) {
  const std::unique_ptr<Sequential> model = buildMlp(6, {5}, 3, 7);
  std::vector<const float*> before;
  for (Parameter* p : model->parameters()) {
    before.push_back(p->value.data());
    before.push_back(p->grad.data());
  }
  model->to(Device::kCpu);
  std::vector<const float*> after;
  for (Parameter* p : model->parameters()) {
    after.push_back(p->value.data());
    after.push_back(p->grad.data());
  }
  EXPECT_EQ(after, before);  // no copy of the model: the same memory
}

TEST(Random, PermutationIsAPermutationAndSeeded) {
  auto a = randomPermutation(1000, 3), b = randomPermutation(1000, 3),
       c = randomPermutation(1000, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::sort(a.begin(), a.end());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], i);
}

TEST(Random, UniformStaysInRange) {
  Random random(1);
  for (int i = 0; i < 10000; ++i) {
    const float u = random.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
}

}  // namespace
}  // namespace ddp::trainer
