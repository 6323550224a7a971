// compare_weights A B [--rtol X] [--exact] [--only PREFIX] [--distance]
// Compares two safetensors files tensor by tensor. Exit 0 when they hold the
// same tensors (names, shapes) and every element satisfies
//   |a - b| <= rtol * (|b| + max|b| of that tensor)      (default rtol 1e-5)
// or, with --exact, the bytes are identical. --only compares just the tensors
// whose names start with PREFIX. Prints the worst difference, and the L2
// norm of a - b over every tensor compared ("distance X"); with --distance
// that is the point (how far one step moved the weights), and the exit is 0
// whenever names and shapes match.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/error.h"
#include "trainer/safetensors.h"

int main(int argc, char** argv) {
  using namespace ddp::trainer;
  if (argc < 3) {
    std::fprintf(stderr, "usage: compare_weights A B [--rtol X] [--exact]\n");
    return 2;
  }
  double rtol = 1e-5;
  bool exact = false, distanceOnly = false;
  std::string only;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exact") == 0) exact = true;
    if (std::strcmp(argv[i], "--distance") == 0) distanceOnly = true;
    if (std::strcmp(argv[i], "--rtol") == 0 && i + 1 < argc) rtol = std::stod(argv[++i]);
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  try {
    const SafetensorsFile a = loadSafetensors(argv[1]), b = loadSafetensors(argv[2]);
    if (a.tensors.size() != b.tensors.size()) {
      std::printf("different tensor counts: %zu vs %zu\n", a.tensors.size(), b.tensors.size());
      return 1;
    }
    bool ok = true;
    double squares = 0;  // of a - b, over every tensor compared
    for (const auto& [name, ta] : a.tensors) {
      if (name.rfind(only, 0) != 0) continue;
      const auto it = b.tensors.find(name);
      if (it == b.tensors.end() || it->second.shape() != ta.shape()) {
        std::printf("%s: missing or shaped differently in %s\n", name.c_str(), argv[2]);
        return 1;
      }
      const Tensor& tb = it->second;
      double scale = 0, worst = 0, worstRel = 0;
      for (float v : tb.span())
        scale = std::max(scale, std::abs(static_cast<double>(v)));
      bool tensorOk = true;
      for (std::size_t i = 0; i < ta.numel(); ++i) {
        const double x = ta.data()[i], y = tb.data()[i], diff = std::abs(x - y);
        squares += diff * diff;
        worst = std::max(worst, diff);
        worstRel = std::max(worstRel, diff / (std::abs(y) + scale + 1e-30));
        if (exact ? std::memcmp(&ta.data()[i], &tb.data()[i], 4) != 0
                  : diff > rtol * (std::abs(y) + scale)) {
          tensorOk = false;
        }
      }
      std::printf("%-20s max |a-b| %.3e  relative %.3e  %s\n", name.c_str(), worst, worstRel,
                  tensorOk ? "ok" : "DIFFERENT");
      ok = ok && tensorOk;
    }
    std::printf("distance %.9g\n", std::sqrt(squares));
    return ok || distanceOnly ? 0 : 1;
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "compare_weights: %s\n", e.what());
    return 2;
  }
}
