// Times readIdxFile on one file: READS reads, one line each (milliseconds),
// for benchmarks/idx_read_time.sh, which links it with trainer/idx_file.cc
// of the revisions it compares.
//
//   idx_read_time FILE DIMS READS
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "trainer/idx_file.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: idx_read_time FILE DIMS READS\n");
    return 2;
  }
  for (int read = 0; read < std::atoi(argv[3]); ++read) {
    const auto start = std::chrono::steady_clock::now();
    const auto array = ddp::trainer::readIdxFile(argv[1], std::strtoul(argv[2], nullptr, 10));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    std::printf("%zu bytes %.1f ms\n", array.data.size(), took.count());
  }
}
