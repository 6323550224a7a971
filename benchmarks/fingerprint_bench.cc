// fingerprint_bench: what the start-up comparison of the ranks' data costs
// each rank (Dataset::fingerprint, a CRC-32 of the samples as loaded): both
// Fashion-MNIST sets, median of 11 passes.
//
//   build/benchmarks/fingerprint_bench [data-dir]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "benchmarks/command_line.h"
#include "trainer/fashion_mnist.h"

namespace {

constexpr ddp::bench::ToolText kText{
    "fingerprint_bench", "usage: fingerprint_bench [DATA_DIR]\n",
    "What the start-up comparison of the ranks' data costs each rank: the fingerprint\n"
    "(a CRC-32 of the samples as loaded) of both Fashion-MNIST sets in DATA_DIR\n"
    "(default: Debian's dataset-fashion-mnist), median of 11 passes; exit 1 if two\n"
    "passes disagree.\n"};

int run(const std::vector<std::string>& args) {
  using namespace ddp::trainer;
  ddp::bench::checkPositional(args, 1);
  const std::string dir = ddp::bench::directoryArgument(args, 0, kDefaultFashionMnistDir);
  const auto train = loadFashionMnist(dir, Split::kTrain);
  const auto test = loadFashionMnist(dir, Split::kTest);
  std::vector<double> times;
  std::string first, now;
  for (int i = 0; i < 11; ++i) {
    const auto start = std::chrono::steady_clock::now();
    now = train->fingerprint() + " / " + test->fingerprint();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (first.empty()) first = now;
  }
  std::nth_element(times.begin(), times.begin() + 5, times.end());
  std::printf("fingerprint_bench: %s: %.1f ms (median of 11)%s\n", first.c_str(), times[5],
              now != first ? " WRONG: the fingerprint changed between passes" : "");
  return now == first ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
