// Reading floats stored in other IEEE formats as float32.
//
// Note [Weights in other float types]
// PyTorch's load_state_dict copies a float16, bfloat16 or float64 state dict
// into float32 parameters, and checkpoints are often saved in half precision.
// So --init-from reads safetensors tensors of dtype F16 and BF16 (both exact
// in float32) and F64 (rounded to nearest; a finite value beyond float32's
// range is refused rather than turned into an infinity) into the float32
// parameters, and says how many it converted.
#pragma once

#include <cstdint>
#include <cstring>

namespace ddp::trainer {

// IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits) as float32: exact,
// subnormals, infinities and NaNs included.
inline float fromFloat16(std::uint16_t half) {
  const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t mantissa = half & 0x3ffu;
  std::uint32_t bits = sign;
  if (exponent == 0x1f) {
    bits |= 0x7f800000u | (mantissa << 13);  // infinity, NaN
  } else if (exponent != 0) {
    bits |= ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: mantissa x 2^-24, normalised for float32
    std::uint32_t floatExponent = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --floatExponent;
    }
    bits |= (floatExponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

}  // namespace ddp::trainer
