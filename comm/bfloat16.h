// bfloat16: the top 16 bits of an IEEE float32 (8 exponent bits, 7 mantissa
// bits). Used to halve the bytes a gradient all-reduce moves; additions are
// done in float32 and only the values stored or on the wire are bfloat16
// (how often a sum is rounded depends on the path: comm/reducer.h,
// GradCompression).
// Rounding is to nearest, ties to even; with 8 significant bits, one
// conversion is off by at most 2^-8 relative.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddp::comm {

inline std::uint16_t toBFloat16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float fromBFloat16(std::uint16_t value) {
  const std::uint32_t bits = std::uint32_t{value} << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// fromBFloat16(toBFloat16(value)), bit for bit, without leaving 32-bit
// lanes: the form that vectorizes (with SSE2 only, the 16-bit round trip
// costs a pack and an unpack per vector, and this loop is the whole cost of
// reducing via bfloat16 in shared memory: Note [bf16 rounding inside the
// reduction] in comm/communicator.h).
inline float roundedToBFloat16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const std::uint32_t quiet = (bits | 0x00400000u) & 0xffff0000u;
  // A NaN: exponent all ones and a mantissa; as signed, so SSE2 compares it.
  const bool nan = static_cast<std::int32_t>(bits & 0x7fffffffu) > 0x7f800000;
  const std::uint32_t out = nan ? quiet : rounded;
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

// The conversions of `count` values, and the MPI backend's bfloat16 sum
// (inout[i] = bfloat16(float(in[i]) + float(inout[i]))), in comm/bfloat16.cc:
// compiled for AVX2 as well (runtime/cpu_dispatch.h). Any thread; the
// caller owns the memory.
void toBFloat16(const float* in, std::uint16_t* out, std::size_t count);
void fromBFloat16(const std::uint16_t* in, float* out, std::size_t count);
void addBFloat16(const std::uint16_t* in, std::uint16_t* inout, std::size_t count);

}  // namespace ddp::comm
