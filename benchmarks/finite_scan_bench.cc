// finite_scan_bench: what a separate NaN/infinity pass over the gradients
// would cost per step (Note [Non-finite check while reducing] in
// comm/finite.h), for the default MLP's 1,863,690 gradients (7.1 MiB):
// median of 51 passes with the gradients cold (64 MiB touched in between)
// and warm (the previous pass left them in cache, as far as they fit).
//
//   build/benchmarks/finite_scan_bench [elements]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/finite.h"

namespace {

double medianMs(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1863690;
  std::vector<float> gradients(count, 0.25f);
  std::vector<float> other(std::size_t{16} << 20, 1.0f);  // 64 MiB, to evict the gradients
  std::vector<double> cold, warm;
  int found = 0;
  for (int i = 0; i < 51; ++i) {
    for (float& v : other)
      v += 1.0f;
    auto start = std::chrono::steady_clock::now();
    found += ddp::comm::anyNonFinite(gradients.data(), count);
    cold.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    start = std::chrono::steady_clock::now();
    found += ddp::comm::anyNonFinite(gradients.data(), count);
    warm.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::printf(
      "finite_scan_bench: %zu floats (%.1f MiB): cold %.3f ms, warm %.3f ms (median of 51)%s\n",
      count, static_cast<double>(count) * 4 / (1 << 20), medianMs(cold), medianMs(warm),
      found != 0 ? " WRONG: found a non-finite value" : "");
  return found == 0 ? 0 : 1;
}
