// This process's memory use, from /proc (Linux).
#pragma once

#include <cstddef>

namespace ddp {

// Peak resident set size (VmHWM) in bytes; 0 where /proc is not available.
// Shared-memory pages this process touched count in full.
std::size_t peakResidentBytes();

// Proportional set size now (Pss in /proc/self/smaps_rollup) in bytes: pages
// shared by k processes count 1/k, so the ranks' values add up to the node's
// real use. 0 where not available.
std::size_t proportionalBytes();

}  // namespace ddp
