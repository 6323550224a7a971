#include "trainer/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/str.h"

namespace ddp::trainer {
namespace {

constexpr std::size_t kAlignment = 64;  // a cache line; AVX-512 loads

std::shared_ptr<void> allocateZeroed(std::size_t numel) {
  const std::size_t bytes = std::max<std::size_t>(
      kAlignment, (numel * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment);
  void* memory = std::aligned_alloc(kAlignment, bytes);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, bytes);
  return std::shared_ptr<void>(memory, std::free);
}

}  // namespace

std::size_t numelOf(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const Shape& shape) {
  return str("[", join(shape, ", "), "]");
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)), numel_(numelOf(shape_)) {
  owner_ = allocateZeroed(numel_);
  data_ = static_cast<float*>(owner_.get());
}

Tensor Tensor::view(float* data, Shape shape, std::shared_ptr<void> owner) {
  Tensor t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.numel_ = numelOf(t.shape_);
  return t;
}

void Tensor::resize(const Shape& shape) {
  if (shape == shape_ && data_ != nullptr) return;
  *this = Tensor(shape);
}

Tensor Tensor::clone() const {
  Tensor copy(shape_);
  if (numel_ > 0) std::memcpy(copy.data_, data_, numel_ * sizeof(float));
  return copy;
}

void Tensor::fill(float value) {
  std::fill(data_, data_ + numel_, value);
}

}  // namespace ddp::trainer
