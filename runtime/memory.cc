#include "runtime/memory.h"

#include <fstream>
#include <string>

namespace ddp {

namespace {

// The value of the "<key> <n> kB" line of a /proc file, in bytes.
std::size_t procKilobytes(const char* path, const std::string& key) {
  std::ifstream file(path);
  std::string word;
  while (file >> word) {
    if (word == key) {
      std::size_t kib = 0;
      file >> kib;
      return kib * 1024;
    }
    file.ignore(1 << 12, '\n');
  }
  return 0;
}

}  // namespace

std::size_t peakResidentBytes() {
  return procKilobytes("/proc/self/status", "VmHWM:");
}

std::size_t proportionalBytes() {
  return procKilobytes("/proc/self/smaps_rollup", "Pss:");
}

}  // namespace ddp
