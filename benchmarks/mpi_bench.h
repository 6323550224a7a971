// What the MPI benchmarks (allreduce_bench, bf16_reduce_bench, ddp_bench)
// share: the size sweep on their command lines (read as every tool reads
// its own: benchmarks/command_line.h), and how a time is measured and
// reported.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmarks/command_line.h"

namespace ddp::bench {

// The size sweep of the MPI benchmarks' command lines, as nccl-tests writes
// it: -b first size, -e last size, -f the factor between them (parseSize's
// forms), -n timed iterations, -w untimed warm-up ones. A benchmark's
// options derive from it and set their own defaults.
struct Sweep {
  std::size_t begin = 64 << 10, end = 256 << 20, factor = 4;
  int iterations = 10, warmup = 2;

  // Takes `flag value` when the flag is one of the sweep's (true), false
  // when it is not; throws BadCommandLine for a bad value of one.
  bool take(const std::string& flag, const char* value) {
    if (flag == "-b" || flag == "-e" || flag == "-f") {
      const std::optional<std::size_t> size = parseSize(value);
      if (!size) throw BadCommandLine(flag + " " + value + ": not a size (8, 64K, 4M, 1G)");
      (flag == "-b" ? begin : flag == "-e" ? end : factor) = *size;
    } else if (flag == "-n" || flag == "-w") {
      const std::optional<int> count = parseCount(value, flag == "-n" ? 1 : 0);
      if (!count) {
        throw BadCommandLine(flag + " " + value + ": not a whole number of " +
                             (flag == "-n" ? "at least 1" : "at least 0"));
      }
      (flag == "-n" ? iterations : warmup) = *count;
    } else {
      return false;
    }
    return true;
  }
  // Throws BadCommandLine when the sizes do not make a sweep.
  void check() const {
    if (begin < 4)
      throw BadCommandLine("-b " + std::to_string(begin) + ": below one float (4 bytes)");
    if (end < begin) {
      throw BadCommandLine("-e " + std::to_string(end) + " is below -b " + std::to_string(begin) +
                           ": the sweep goes from -b up to -e");
    }
    if (factor < 2)
      throw BadCommandLine("-f " + std::to_string(factor) +
                           ": the factor between sizes must be at least 2");
  }
};

// The median over iterations of the slowest rank's value: the iteration's
// time is the time of its last rank, and the median keeps one slow
// iteration from moving it. Collective over MPI_COMM_WORLD; every rank
// passes as many values and gets the same answer.
inline double slowestRankMedian(const std::vector<double>& values) {
  std::vector<double> worst(values.size());
  MPI_Allreduce(values.data(), worst.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  std::nth_element(worst.begin(), worst.begin() + static_cast<long>(worst.size() / 2), worst.end());
  return worst[worst.size() / 2];
}

struct Measured {
  double micros = 0.0;  // slowestRankMedian of the timed iterations
  long wrong = 0;       // wrong elements, summed over iterations and ranks
};

// `warmup` untimed then `iterations` timed calls, each after prepare() and a
// barrier; check() counts the wrong elements of each result. Collective.
inline Measured measure(int iterations, int warmup, const std::function<void()>& prepare,
                        const std::function<void()>& call, const std::function<long()>& check) {
  std::vector<double> times;
  long wrong = 0;
  for (int i = 0; i < warmup + iterations; ++i) {
    prepare();
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    call();
    const double elapsed = MPI_Wtime() - start;
    wrong += check();
    if (i >= warmup) times.push_back(elapsed * 1e6);
  }
  Measured m;
  m.micros = slowestRankMedian(times);
  MPI_Allreduce(&wrong, &m.wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return m;
}

}  // namespace ddp::bench
