// Runs a fuzz target over its corpus without libFuzzer, as `target -runs=0
// CORPUS` does with it: every file named, and every file in a folder named,
// is passed once to LLVMFuzzerTestOneInput. The corpus (seeds, and the inputs
// that once crashed or hung a target) thereby becomes a regression test of
// every build. A target lets only the errors a user is meant to see
// (DataError, UsageError) escape its input; anything else ends this program
// with std::terminate, and the test fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/safetensors.h"  // readWholeFile

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputsOf(const std::filesystem::path& named) {
  if (!std::filesystem::is_directory(named)) return {named};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(named)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& path : inputsOf(argv[i])) {
      const std::string bytes = ddp::trainer::readWholeFile(path);  // a DataError names it
      std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
      std::fflush(stdout);  // names the input that a crash follows
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++count;
    }
  }
  std::printf("%zu inputs, none crashed\n", count);
  return count > 0 ? 0 : 1;
}
