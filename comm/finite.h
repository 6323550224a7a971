// What a reduction can tell of its result where it already touches it:
// whether it is finite, and the sum of its squares.
//
// Note [Non-finite check while reducing]
// Training must stop (or skip the update) when the averaged gradients hold a
// NaN or an infinity. A separate pass over a 7 MiB gradient costs ~0.3 ms of
// a 9 ms step (measured), so the MPI backend checks each all-reduce's result
// where it already touches it: the shared-memory reduction checks each block
// while it is in L1 and the ranks combine their chunks' answers through the
// control slots; the plain MPI path checks on the communication thread,
// overlapped with backward (when CommOptions::checkNonFinite asks for it:
// allreduce_bench does not). The answer travels on the Work
// (Work::resultChecks); the Reducer scans only what no backend checked.
//
// Note [Sum of squares while reducing]
// Gradient clipping (Note [Clipping the averaged gradient] in
// trainer/clip.h) needs the norm of the reduced gradients. A pass of its own
// after the all-reduce costs ~0.3 ms per 7 MiB, on the training thread,
// after backward, where nothing hides it. When CommOptions::sumOfSquares asks
// for it, the MPI backend sums the squares where it touches the result: the
// shared-memory reduction while each block is in L1 (each rank over its own
// chunk only, so the work is divided among the ranks), the ranks adding
// their chunks' sums in rank order through the control slots; the plain MPI
// path on the communication thread, overlapped with backward. Every rank
// adds the same numbers in the same order, so every rank gets the same bits:
// clipping must scale every replica alike. The answer travels on the Work
// (Work::resultChecks); the Reducer sums its buckets' answers in
// bucket order and scans only buckets no backend measured.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddp::comm {

// Whether any of `count` values is a NaN or an infinity (exponent all ones).
// Integer operations only, so the compiler vectorises the loop.
template <class T>
bool anyNonFinite(const T* values, std::size_t count) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr Bits kExponent =
      static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  constexpr std::size_t kBlock = 4096;  // a NaN near the start does not cost a whole pass
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t end = std::min(count, begin + kBlock);
    Bits any = 0;
    for (std::size_t i = begin; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, values + i, sizeof bits);
      any |= static_cast<Bits>((bits & kExponent) == kExponent);
    }
    if (any != 0) return true;
  }
  return false;
}

// The same for bfloat16 bits (comm/bfloat16.h): exponent 0x7f80.
inline bool anyNonFiniteBFloat16(const std::uint16_t* values, std::size_t count) {
  constexpr std::uint16_t kExponent = 0x7f80;
  std::uint16_t any = 0;
  for (std::size_t i = 0; i < count; ++i)
    any |= static_cast<std::uint16_t>((values[i] & kExponent) == kExponent);
  return any != 0;
}

// The sum of the squares of values[0, count), in double (float32 loses digits
// over millions of squares) and in one fixed order for a given count.
inline double sumOfSquares(const float* values, std::size_t count) {
  // Independent partial sums, so that the additions overlap instead of each
  // waiting for the last (one chain is bound by the adder's latency).
  constexpr std::size_t kLanes = 8;
  double lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (std::size_t k = 0; k < kLanes; ++k) {
      const double v = values[i + k];
      lanes[k] += v * v;
    }
  }
  double total = 0.0;
  for (; i < count; ++i) {
    const double v = values[i];
    total += v * v;
  }
  for (const double lane : lanes)
    total += lane;
  return total;
}

}  // namespace ddp::comm
