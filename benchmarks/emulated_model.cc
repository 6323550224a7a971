#include "benchmarks/emulated_model.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <span>

namespace ddp::bench {

EmulatedModel::EmulatedModel(Profile profile, int rank)
    : profile_(std::move(profile)), random_(static_cast<unsigned>(1234 + rank)) {
  for (const Layer& layer : profile_.layers) {
    for (const Tensor& t : layer.tensors)
      specs_.push_back({t.name, t.numel(), true});
    largest_ = std::max(largest_, layer.numel());  // a layer holds its tensors
  }
}

void EmulatedModel::setWork(std::size_t work) {
  work_ = work;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a((largest_ / kGemmColumns + 1) * work), b(work * kGemmColumns);
  for (float& v : a)
    v = uniform(random_);
  for (float& v : b)
    v = uniform(random_);
  setInputs(std::move(a), std::move(b));
}

void EmulatedModel::forward(float* scratch) const {
  for (const Layer& layer : profile_.layers)
    compute(scratch, layer.numel());
}

void EmulatedModel::backward(comm::Reducer& reducer) const {
  std::size_t index = specs_.size();
  for (std::size_t l = profile_.layers.size(); l-- > 0;) {
    const std::size_t first = index - profile_.layers[l].tensors.size();
    for (std::size_t t = first; t < index; ++t) {
      const std::span<float> gradient = reducer.gradient(t);
      compute(gradient.data(), gradient.size());
    }
    for (std::size_t t = first; t < index; ++t)
      reducer.markReady(t);
    index = first;
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point& mark) {
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return s;
}

class HostModel final : public EmulatedModel {
 public:
  HostModel(const Profile& profile, int rank) : EmulatedModel(profile, rank) {
    parameters_.assign(profile.parameterCount(), 0.01f);
    scratch_.resize(largestLayer());
  }

  Phases step(comm::Reducer& reducer) override {
    Phases p;
    auto mark = Clock::now();
    forward(scratch_.data());
    p.forward = since(mark);
    reducer.prepareForBackward(true);
    backward(reducer);
    p.backward = since(mark);
    reducer.finalize();
    p.comm = since(mark);
    optimizerStep(reducer);
    p.optimizer = since(mark);
    return p;
  }

  std::span<const float> hostGradient(comm::Reducer& reducer, std::size_t index,
                                      std::vector<float>&) override {
    return reducer.gradient(index);
  }

 private:
  void setInputs(std::vector<float> a, std::vector<float> b) override {
    a_ = std::move(a);
    b_ = std::move(b);
  }

  void compute(float* out, std::size_t n) const override {
    const std::size_t rows = n / kGemmColumns, tail = n % kGemmColumns;
    const int k = static_cast<int>(work()), columns = static_cast<int>(kGemmColumns);
    if (rows > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), columns, k,
                  1.0f, a_.data(), k, b_.data(), columns, 0.0f, out, columns);
    }
    if (tail > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, static_cast<int>(tail), k, 1.0f,
                  a_.data(), k, b_.data(), columns, 0.0f, out + rows * kGemmColumns,
                  static_cast<int>(tail));
    }
  }

  void optimizerStep(comm::Reducer& reducer) {
    std::size_t offset = 0;
    for (std::size_t t = 0; t < specs().size(); ++t) {
      const std::span<float> gradient = reducer.gradient(t);
      float* p = parameters_.data() + offset;
      for (std::size_t i = 0; i < gradient.size(); ++i)
        p[i] -= 1e-6f * gradient[i];
      offset += gradient.size();
    }
  }

  std::vector<float> parameters_;
  std::vector<float> a_, b_, scratch_;
};

}  // namespace

std::unique_ptr<EmulatedModel> makeHostModel(const Profile& profile, int rank, std::size_t work) {
  auto model = std::make_unique<HostModel>(profile, rank);
  model->setWork(work);
  return model;
}

}  // namespace ddp::bench
