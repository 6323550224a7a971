// Tensor: a dense, row-major float32 array in host memory.
//
// A Tensor either owns its storage (64-byte aligned, zero-initialised) or is a
// view into storage owned by someone else, kept alive by a shared owner. Views
// are how gradients live inside gradient buckets without copies (the Reducer
// hands each parameter a view into its bucket; see comm/ and DESIGN).
// Copying a Tensor copies the handle, not the data: both refer to the same
// floats. Use clone() for a deep copy.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ddp::trainer {

using Shape = std::vector<std::size_t>;

std::size_t numelOf(const Shape& shape);
std::string shapeString(const Shape& shape);  // "[1024, 784]"

class Tensor {
 public:
  Tensor() = default;
  // Owns numel(shape) zeroed floats.
  explicit Tensor(Shape shape);
  // A view of `data` (numel(shape) floats) kept alive by `owner`.
  static Tensor view(float* data, Shape shape, std::shared_ptr<void> owner);

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> span() { return {data_, numel_}; }
  std::span<const float> span() const { return {data_, numel_}; }
  const Shape& shape() const { return shape_; }
  std::size_t dim(std::size_t axis) const { return shape_.at(axis); }
  std::size_t numel() const { return numel_; }
  bool empty() const { return numel_ == 0; }

  // Reallocates (zeroed) unless the shape already matches: lets layers keep
  // their activation buffers across steps and reallocate only when the batch
  // size changes (the last, smaller batch of an epoch).
  void resize(const Shape& shape);
  Tensor clone() const;
  void fill(float value);

 private:
  std::shared_ptr<void> owner_;
  float* data_ = nullptr;
  Shape shape_;
  std::size_t numel_ = 0;
};

}  // namespace ddp::trainer
