// The model profiles match the published models' parameter counts exactly.
#include "benchmarks/model_profiles.h"

#include <gtest/gtest.h>

#include "runtime/error.h"

namespace ddp::bench {
namespace {

struct Expected {
  const char* name;
  std::size_t tensors;
  std::size_t parameters;
  const char* first;
  const char* last;
};

class Profiles : public ::testing::TestWithParam<Expected> {};

TEST_P(Profiles, MatchTheRealModels) {
  const Expected& e = GetParam();
  const Profile p = makeProfile(e.name);
  EXPECT_EQ(p.tensorCount(), e.tensors);
  EXPECT_EQ(p.parameterCount(), e.parameters);
  EXPECT_EQ(p.layers.front().tensors.front().name, e.first);
  EXPECT_EQ(p.layers.back().tensors.back().name, e.last);
}

// torchvision resnet50(), transformers BertModel(bert-base-uncased) and
// GPT2Model(gpt2): sum(p.numel() for p in model.parameters()).
INSTANTIATE_TEST_SUITE_P(
    Known, Profiles,
    ::testing::Values(Expected{"resnet50", 161, 25557032, "conv1.weight", "fc.bias"},
                      Expected{"bert-base", 199, 109482240, "embeddings.word_embeddings.weight",
                               "pooler.dense.bias"},
                      Expected{"gpt2", 148, 124439808, "wte.weight", "ln_f.bias"},
                      Expected{"mlp", 6, 1863690, "layers.0.weight", "layers.4.bias"}),
    [](const auto& info) {
      std::string name = info.param.name;
      std::erase(name, '-');
      return name;
    });

TEST(Profiles, UnknownNameIsAUsageError) {
  EXPECT_THROW(makeProfile("vgg16"), UsageError);
}

}  // namespace
}  // namespace ddp::bench
