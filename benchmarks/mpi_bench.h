// What the MPI benchmarks (allreduce_bench, bf16_reduce_bench, ddp_bench)
// share: sizes on their command lines, and how a time is measured and
// reported.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace ddp::bench {

// "8", "64K", "4M", "1G" (powers of two) in bytes.
inline std::size_t parseSize(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  switch (*end) {
    case 'K':
    case 'k':
      value *= 1 << 10;
      break;
    case 'M':
    case 'm':
      value *= 1 << 20;
      break;
    case 'G':
    case 'g':
      value *= 1 << 30;
      break;
    default:
      break;
  }
  return static_cast<std::size_t>(value);
}

// The sizes and iteration counts every MPI benchmark takes on its command
// line, as nccl-tests' do: -b the first size, -e the last, -f the factor
// between them (parseSize's forms), -n timed iterations, -w untimed warm-up
// ones. A benchmark's options derive from it and set their own defaults.
struct Sweep {
  std::size_t begin = 64 << 10, end = 256 << 20, factor = 4;
  int iterations = 10, warmup = 2;

  // Takes `flag value` when the flag is one of the sweep's; false otherwise.
  bool take(const std::string& flag, const char* value) {
    if (flag == "-b") {
      begin = parseSize(value);
    } else if (flag == "-e") {
      end = parseSize(value);
    } else if (flag == "-f") {
      factor = parseSize(value);
    } else if (flag == "-n") {
      iterations = std::atoi(value);
    } else if (flag == "-w") {
      warmup = std::atoi(value);
    } else {
      return false;
    }
    return true;
  }
  bool valid() const {
    return begin >= 4 && end >= begin && factor >= 2 && iterations >= 1 && warmup >= 0;
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
