#include "benchmarks/model_profiles.h"

#include <functional>
#include <numeric>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::bench {
namespace {

using Shape = std::vector<std::size_t>;

void add(Profile& p, const std::string& layer, std::vector<Tensor> tensors) {
  p.layers.push_back(Layer{layer, std::move(tensors)});
}

// A linear layer's weight (out x in) and bias.
std::vector<Tensor> linear(const std::string& name, std::size_t in, std::size_t out) {
  return {{name + ".weight", {out, in}}, {name + ".bias", {out}}};
}

// GPT-2's Conv1D: a linear layer that stores its weight as (in x out).
std::vector<Tensor> conv1d(const std::string& name, std::size_t in, std::size_t out) {
  return {{name + ".weight", {in, out}}, {name + ".bias", {out}}};
}

std::vector<Tensor> layerNorm(const std::string& name, std::size_t width) {
  return {{name + ".weight", {width}}, {name + ".bias", {width}}};
}

// A bias-free convolution followed by its batch norm: one layer of backward.
void convBn(Profile& p, const std::string& conv, const std::string& bn, std::size_t in,
            std::size_t out, std::size_t kernel) {
  add(p, conv,
      {{conv + ".weight", {out, in, kernel, kernel}},
       {bn + ".weight", {out}},
       {bn + ".bias", {out}}});
}

Profile resnet50() {
  Profile p{"resnet50", {}};
  convBn(p, "conv1", "bn1", 3, 64, 7);
  std::size_t in = 64;
  const std::size_t blocks[4] = {3, 4, 6, 3};
  for (std::size_t stage = 0; stage < 4; ++stage) {
    const std::size_t width = std::size_t{64} << stage;
    for (std::size_t b = 0; b < blocks[stage]; ++b) {
      const std::string prefix = str("layer", stage + 1, ".", b, ".");
      convBn(p, prefix + "conv1", prefix + "bn1", in, width, 1);
      convBn(p, prefix + "conv2", prefix + "bn2", width, width, 3);
      convBn(p, prefix + "conv3", prefix + "bn3", width, width * 4, 1);
      if (b == 0) convBn(p, prefix + "downsample.0", prefix + "downsample.1", in, width * 4, 1);
      in = width * 4;
    }
  }
  add(p, "fc", linear("fc", 2048, 1000));
  return p;
}

Profile bertBase() {
  Profile p{"bert-base", {}};
  const std::size_t h = 768, ff = 3072;
  const std::string e = "embeddings.";
  add(p, e + "word_embeddings", {{e + "word_embeddings.weight", {30522, h}}});
  add(p, e + "position_embeddings", {{e + "position_embeddings.weight", {512, h}}});
  add(p, e + "token_type_embeddings", {{e + "token_type_embeddings.weight", {2, h}}});
  add(p, e + "LayerNorm", layerNorm(e + "LayerNorm", h));
  for (std::size_t l = 0; l < 12; ++l) {
    const std::string x = str("encoder.layer.", l, ".");
    for (const char* proj : {"query", "key", "value"})
      add(p, x + "attention.self." + proj, linear(x + "attention.self." + proj, h, h));
    add(p, x + "attention.output.dense", linear(x + "attention.output.dense", h, h));
    add(p, x + "attention.output.LayerNorm", layerNorm(x + "attention.output.LayerNorm", h));
    add(p, x + "intermediate.dense", linear(x + "intermediate.dense", h, ff));
    add(p, x + "output.dense", linear(x + "output.dense", ff, h));
    add(p, x + "output.LayerNorm", layerNorm(x + "output.LayerNorm", h));
  }
  add(p, "pooler.dense", linear("pooler.dense", h, h));
  return p;
}

Profile gpt2() {
  Profile p{"gpt2", {}};
  const std::size_t h = 768;
  add(p, "wte", {{"wte.weight", {50257, h}}});
  add(p, "wpe", {{"wpe.weight", {1024, h}}});
  for (std::size_t l = 0; l < 12; ++l) {
    const std::string x = str("h.", l, ".");
    add(p, x + "ln_1", layerNorm(x + "ln_1", h));
    add(p, x + "attn.c_attn", conv1d(x + "attn.c_attn", h, 3 * h));
    add(p, x + "attn.c_proj", conv1d(x + "attn.c_proj", h, h));
    add(p, x + "ln_2", layerNorm(x + "ln_2", h));
    add(p, x + "mlp.c_fc", conv1d(x + "mlp.c_fc", h, 4 * h));
    add(p, x + "mlp.c_proj", conv1d(x + "mlp.c_proj", 4 * h, h));
  }
  add(p, "ln_f", layerNorm("ln_f", h));
  return p;
}

Profile mlp() {
  Profile p{"mlp", {}};
  add(p, "layers.0", linear("layers.0", 784, 1024));
  add(p, "layers.2", linear("layers.2", 1024, 1024));
  add(p, "layers.4", linear("layers.4", 1024, 10));
  return p;
}

}  // namespace

std::size_t Tensor::numel() const {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

std::size_t Layer::numel() const {
  return std::transform_reduce(tensors.begin(), tensors.end(), std::size_t{0}, std::plus<>(),
                               [](const Tensor& t) { return t.numel(); });
}

std::size_t Profile::tensorCount() const {
  return std::transform_reduce(layers.begin(), layers.end(), std::size_t{0}, std::plus<>(),
                               [](const Layer& l) { return l.tensors.size(); });
}

std::size_t Profile::parameterCount() const {
  return std::transform_reduce(layers.begin(), layers.end(), std::size_t{0}, std::plus<>(),
                               [](const Layer& l) { return l.numel(); });
}

std::vector<std::string> profileNames() {
  return {"resnet50", "bert-base", "gpt2", "mlp"};
}

Profile makeProfile(const std::string& name) {
  if (name == "resnet50") return resnet50();
  if (name == "bert-base") return bertBase();
  if (name == "gpt2") return gpt2();
  if (name == "mlp") return mlp();
  throw UsageError(str("--profile: unknown '", name, "' (known: resnet50, bert-base, gpt2, mlp)"));
}

}  // namespace ddp::bench
