// fingerprint_bench: what the start-up comparison of the ranks' data costs
// each rank (Dataset::fingerprint, a CRC-32 of the samples as loaded): both
// Fashion-MNIST sets, median of 11 passes.
//
//   build/benchmarks/fingerprint_bench [data-dir]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "trainer/fashion_mnist.h"

int main(int argc, char** argv) {
  using namespace ddp::trainer;
  const char* dir = argc > 1 ? argv[1] : kDefaultFashionMnistDir;
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
