// This process's memory use, from /proc (Linux).
#pragma once

#include <cstddef>

namespace ddp {

// Peak resident set size (VmHWM) in bytes; 0 where /proc is not available.
// Shared-memory pages this process touched count in full.
std::size_t peakResidentBytes();

}  // namespace ddp
