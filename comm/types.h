// Element types and reduction operators understood by every Communicator.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddp::comm {

// kUInt8 carries bytes (text, flags); it supports sum, max and min.
// kBFloat16 (comm/bfloat16.h) supports sum and average, accumulated in float32.
enum class DataType { kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBFloat16 };

// Sum and average are what gradients need; max and min serve agreement checks
// (any rank failed? the largest step?). Average is defined for floating types.
enum class ReduceOp { kSum, kAvg, kMax, kMin };

constexpr std::size_t sizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
    case DataType::kBFloat16:
      return 2;
  }
  return 0;
}

const char* dataTypeName(DataType type);
const char* reduceOpName(ReduceOp op);

// The DataType of a C++ element type, for the typed helpers.
template <class T>
constexpr DataType dataTypeOf();
template <>
constexpr DataType dataTypeOf<float>() {
  return DataType::kFloat32;
}
template <>
constexpr DataType dataTypeOf<double>() {
  return DataType::kFloat64;
}
template <>
constexpr DataType dataTypeOf<std::int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType dataTypeOf<std::int64_t>() {
  return DataType::kInt64;
}
template <>
constexpr DataType dataTypeOf<std::uint8_t>() {
  return DataType::kUInt8;
}

}  // namespace ddp::comm
