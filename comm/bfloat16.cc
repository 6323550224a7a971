#include "comm/bfloat16.h"

#include "runtime/cpu_dispatch.h"

namespace ddp::comm {

DDP_ALSO_FOR_AVX2 void toBFloat16(const float* in, std::uint16_t* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toBFloat16(in[i]);
}

DDP_ALSO_FOR_AVX2 void fromBFloat16(const std::uint16_t* in, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    out[i] = fromBFloat16(in[i]);
}

DDP_ALSO_FOR_AVX2 void addBFloat16(const std::uint16_t* in, std::uint16_t* inout,
                                   std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    inout[i] = toBFloat16(fromBFloat16(in[i]) + fromBFloat16(inout[i]));
}

}  // namespace ddp::comm
