#include "runtime/subnormals.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace ddp {
namespace {

#if defined(__x86_64__)
// MXCSR's flush-to-zero (results) and denormals-are-zero (inputs) bits.
constexpr unsigned kFlushBits = 0x8040;
#endif

}  // namespace

bool setFlushSubnormals(bool flush) {
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? csr | kFlushBits : csr & ~kFlushBits);
  return true;
#else
  (void)flush;
  return false;
#endif
}

bool flushesSubnormals() {
#if defined(__x86_64__)
  return (_mm_getcsr() & kFlushBits) == kFlushBits;
#else
  return false;
#endif
}

}  // namespace ddp
