// finite_scan_bench: what a separate pass over the gradients costs per step:
// the NaN/infinity check (Note [Non-finite check while reducing] in
// comm/finite.h) and the sum of squares that clipping needs (Note [Sum of
// squares while reducing]), for the default MLP's 1,863,690 gradients
// (7.1 MiB) unless told another count: median of 51 passes with the
// gradients cold (64 MiB touched in between) and warm (the previous pass
// left them in cache, as far as they fit).
//
//   build/benchmarks/finite_scan_bench [elements]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "benchmarks/command_line.h"
#include "comm/finite.h"

namespace {

double medianMs(std::vector<double> times) {
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

double msOf(const std::function<void()>& pass) {
  const auto start = std::chrono::steady_clock::now();
  pass();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

constexpr ddp::bench::ToolText kText{
    "finite_scan_bench", "usage: finite_scan_bench [ELEMENTS]\n",
    "What a separate pass over the gradients costs a step: the NaN and infinity check\n"
    "and the sum of squares clipping needs, over ELEMENTS floats (default: the default\n"
    "MLP's 1863690), median of 51 passes with the gradients cold and warm in cache.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 1);
  const auto count =
      static_cast<std::size_t>(ddp::bench::countArgument(args, 0, 1, 1863690, "ELEMENTS"));
  std::vector<float> gradients(count, 0.25f);
  std::vector<float> other(std::size_t{16} << 20, 1.0f);  // 64 MiB, to evict the gradients
  int found = 0;
  double squares = 0.0;
  const std::function<void()> passes[] = {
      [&] { found += ddp::comm::anyNonFinite(gradients.data(), count); },
      [&] { squares = ddp::comm::sumOfSquares(gradients.data(), count); }};
  const char* names[] = {"anyNonFinite", "sumOfSquares"};
  for (int p = 0; p < 2; ++p) {
    std::vector<double> cold, warm;
    for (int i = 0; i < 51; ++i) {
      for (float& v : other)
        v += 1.0f;
      cold.push_back(msOf(passes[p]));
      warm.push_back(msOf(passes[p]));
    }
    std::printf(
        "finite_scan_bench: %zu floats (%.1f MiB), %s: cold %.3f ms, warm %.3f ms (median "
        "of 51)\n",
        count, static_cast<double>(count) * 4 / (1 << 20), names[p], medianMs(cold),
        medianMs(warm));
  }
  const bool wrong = found != 0 || squares != 0.0625 * static_cast<double>(count);
  if (wrong) std::printf("WRONG: a non-finite value found, or the sum of squares is off\n");
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
