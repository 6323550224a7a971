#include "trainer/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "ddp_config.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/str.h"
#if DDP_WITH_CUDA
#include "runtime/cuda/memory.h"
#include "trainer/cuda/kernels.h"
#endif

namespace ddp::trainer {
namespace {

constexpr std::size_t kAlignment = 64;  // a cache line; AVX-512 loads

std::shared_ptr<void> allocateOn(Device device, const Shape& shape, std::size_t numel) {
  try {
    if (device == Device::kCpu) return allocateZeroedHost(numel * sizeof(float), kAlignment);
#if DDP_WITH_CUDA
    return ddp::cuda::allocateDevice(numel * sizeof(float));
#else
    throw UsageError("this build of ddp has no CUDA support (configure with -Dcuda=enabled)");
#endif
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(str("a ", shapeString(shape), " tensor: ", e.what()));
  }
}

// Copies `count` floats between any two devices.
void copyFloats(float* to, Device toDevice, const float* from, Device fromDevice,
                std::size_t count) {
  const std::size_t bytes = count * sizeof(float);
  if (bytes == 0) return;
  if (toDevice == Device::kCpu && fromDevice == Device::kCpu) {
    std::memcpy(to, from, bytes);
    return;
  }
#if DDP_WITH_CUDA
  if (toDevice == Device::kCuda && fromDevice == Device::kCuda) {
    ddp::cuda::copyOnDevice(to, from, bytes);
  } else if (toDevice == Device::kCuda) {
    ddp::cuda::copyToDevice(to, from, bytes);
  } else {
    ddp::cuda::copyToHost(to, from, bytes);
  }
#else
  throw InternalError("a CUDA tensor exists in a build without CUDA");
#endif
}

}  // namespace

const char* deviceName(Device device) {
  return device == Device::kCuda ? "cuda" : "cpu";
}

bool cudaBuild() {
  return DDP_WITH_CUDA != 0;
}

std::size_t numelOf(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const Shape& shape) {
  return str("[", join(shape, ", "), "]");
}

Tensor::Tensor(Shape shape, Device device)
    : shape_(std::move(shape)), numel_(numelOf(shape_)), device_(device) {
  owner_ = allocateOn(device_, shape_, numel_);
  data_ = static_cast<float*>(owner_.get());
}

Tensor Tensor::view(float* data, Shape shape, std::shared_ptr<void> owner, Device device) {
  Tensor t;
  t.device_ = device;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.numel_ = numelOf(t.shape_);
  return t;
}

void Tensor::resize(const Shape& shape) {
  resize(shape, device_);
}

void Tensor::resize(const Shape& shape, Device device) {
  if (shape == shape_ && device == device_ && data_ != nullptr) return;
  *this = Tensor(shape, device);
}

Tensor Tensor::clone() const {
  return to(device_);
}

Tensor Tensor::to(Device device) const {
  Tensor copy(shape_, device);
  copyFloats(copy.data_, device, data_, device_, numel_);
  return copy;
}

void Tensor::copyFrom(const Tensor& source) {
  DDP_CHECK(source.numel() == numel_,
            str("copyFrom: ", shapeString(source.shape()), " into ", shapeString(shape_)));
  copyFloats(data_, device_, source.data_, source.device_, numel_);
}

void Tensor::copyFromHost(std::size_t offset, std::span<const float> values) {
  DDP_CHECK(offset + values.size() <= numel_, str("copyFromHost: ", values.size(), " values at ",
                                                  offset, " into ", shapeString(shape_)));
  copyFloats(data_ + offset, device_, values.data(), Device::kCpu, values.size());
}

void Tensor::copyToHost(std::size_t offset, std::span<float> out) const {
  DDP_CHECK(offset + out.size() <= numel_,
            str("copyToHost: ", out.size(), " values at ", offset, " of ", shapeString(shape_)));
  copyFloats(out.data(), Device::kCpu, data_ + offset, device_, out.size());
}

void Tensor::fill(float value) {
  if (device_ == Device::kCpu) {
    std::fill(data_, data_ + numel_, value);
    return;
  }
#if DDP_WITH_CUDA
  cuda::fill(data_, numel_, value);
#endif
}

}  // namespace ddp::trainer
