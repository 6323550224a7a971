// Tensor: a dense, row-major float32 array in host or device memory.
//
// Device memory exists only in builds with the `cuda` feature; a CUDA tensor's
// data() is a device pointer, for kernels, cuBLAS and NCCL, never for host
// code. Moving data between devices is explicit (to(), copyFrom()).
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

enum class Device { kCpu, kCuda };
const char* deviceName(Device device);  // "cpu", "cuda"
// Whether this build can place tensors on CUDA devices.
bool cudaBuild();

std::size_t numelOf(const Shape& shape);
std::string shapeString(const Shape& shape);  // "[1024, 784]"

class Tensor {
 public:
  Tensor() = default;
  // Owns numel(shape) zeroed floats on `device`. Throws UsageError for kCuda in
  // a build without CUDA.
  explicit Tensor(Shape shape, Device device = Device::kCpu);
  // A view of `data` (numel(shape) floats on `device`) kept alive by `owner`.
  static Tensor view(float* data, Shape shape, std::shared_ptr<void> owner,
                     Device device = Device::kCpu);

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> span() { return {data_, numel_}; }
  std::span<const float> span() const { return {data_, numel_}; }
  const Shape& shape() const { return shape_; }
  std::size_t dim(std::size_t axis) const { return shape_.at(axis); }
  std::size_t numel() const { return numel_; }
  bool empty() const { return numel_ == 0; }
  Device device() const { return device_; }
  bool onCuda() const { return device_ == Device::kCuda; }

  // Reallocates (zeroed) unless the shape already matches: lets layers keep
  // their activation buffers across steps and reallocate only when the batch
  // size changes (the last, smaller batch of an epoch).
  // The tensor stays on its device.
  void resize(const Shape& shape);
  void resize(const Shape& shape, Device device);
  Tensor clone() const;
  void fill(float value);
  // A copy of this tensor on `device` (waits for device copies to finish).
  Tensor to(Device device) const;
  // This tensor if it is in host memory, else a host copy (for writing files).
  Tensor onHost() const { return device_ == Device::kCpu ? *this : to(Device::kCpu); }
  // Copies `source`'s values (same element count, any device) into this tensor.
  void copyFrom(const Tensor& source);
  // Copies host `values` into elements [offset, offset + values.size()) of
  // this tensor, on its device (a checkpoint restored piece by piece).
  void copyFromHost(std::size_t offset, std::span<const float> values);
  // Copies elements [offset, offset + out.size()) of this tensor, on any
  // device, into host `out` (a checkpoint written piece by piece).
  void copyToHost(std::size_t offset, std::span<float> out) const;

 private:
  std::shared_ptr<void> owner_;
  float* data_ = nullptr;
  Shape shape_;
  std::size_t numel_ = 0;
  Device device_ = Device::kCpu;
};

}  // namespace ddp::trainer
