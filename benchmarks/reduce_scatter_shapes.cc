// reduce_scatter_shapes: how the MPI library's own MPI_Reduce_scatter
// times depend on the shape of the parts, the measurement behind Note
// [Plain reduce-scatter in stripes] (comm/mpi/mpi_communicator.cc). No ddp
// code is timed here: only raw MPI calls.
//
//   mpirun -np N reduce_scatter_shapes [-b 1M] [-e 16M] [-f 4] [-n 10] [-w 3]
//
// Per size (the whole buffer), float32 sums, each timed as the
// median over iterations of the slowest rank:
//   equal       MPI_Reduce_scatter in place, every rank's part the same (the last
//               takes the remainder);
//   one rank    MPI_Reduce_scatter, everything to rank 0 (the others' counts 0);
//   half        MPI_Reduce_scatter, equal parts for the first half of the
//               ranks (at least one), 0 for the rest;
//   one rank, MPI_Reduce   the "one rank" shape as one MPI_Reduce to rank 0,
//               into another buffer;
//   ... in place           the same with MPI_IN_PLACE at rank 0;
//   half, MPI_Reduce each  the "half" shape as one MPI_Reduce per non-empty
//               part, to its owner, into another buffer (what
//               reduceScatterPlain does when a stripe is empty).
// Rank r contributes r + (i % 7) at element i, so every owner's result has
// the closed form n(n-1)/2 + n(i % 7), checked after every call (#wrong; the
// program exits 1 if any).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/mpi_bench.h"

namespace {

using ddp::bench::measure;
using ddp::bench::Measured;

struct Options : ddp::bench::Sweep {
  Options() { begin = 1 << 20, end = 16 << 20, warmup = 3; }
};

// Throws BadCommandLine, naming what is wrong with the command line.
void parse(const std::vector<std::string>& args, Options& o) {
  using ddp::bench::BadCommandLine;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) throw BadCommandLine(flag + " needs a value");
    if (!o.take(flag, args[i + 1].c_str())) throw BadCommandLine("unknown flag '" + flag + "'");
  }
  o.check();
}

// Parts of `count` elements: equal for the first `owners` ranks, 0 for the rest.
std::vector<int> partsFor(std::size_t count, int ranks, int owners) {
  std::vector<int> counts(static_cast<std::size_t>(ranks), 0);
  const auto share = count / static_cast<std::size_t>(owners);
  for (int q = 0; q < owners; ++q)
    counts[static_cast<std::size_t>(q)] = static_cast<int>(share);
  counts[static_cast<std::size_t>(owners - 1)] +=
      static_cast<int>(count - share * static_cast<std::size_t>(owners));
  return counts;
}

constexpr ddp::bench::ToolText kText{
    "reduce_scatter_shapes",
    "usage: reduce_scatter_shapes [-b bytes] [-e bytes] [-f factor] [-n iters] [-w warmup]\n",
    "How the MPI library's own MPI_Reduce_scatter times depend on the shape of the\n"
    "parts (equal, all to one rank, to half the ranks), against MPI_Reduce calls of\n"
    "the same shapes: raw MPI calls only, float32 sums, per size (the whole buffer,\n"
    "-b 1M to -e 16M by -f 4) the median of -n 10 iterations (after -w 3) of the\n"
    "slowest rank, each owner's result checked (#wrong; exit 1 if any).\n"};

int run(const std::vector<std::string>& args) {
  Options o;
  parse(args, o);
  MPI_Init(nullptr, nullptr);
  int n = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::printf(
        "# reduce_scatter_shapes: %d ranks; raw MPI calls, float32 sum, median of %d "
        "iterations (after %d warm-up) of the slowest rank\n",
        n, o.iterations, o.warmup);
    std::printf("#%11s  %-24s %12s %9s %7s\n", "size", "shape, call", "time(us)", "/equal",
                "#wrong");
  }
  long anyWrong = 0;
  for (std::size_t bytes = o.begin; bytes <= o.end; bytes *= o.factor) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> data(count), received(count);
    const auto fill = [&] {  // and poisons the other buffer: no result is left over
      for (std::size_t i = 0; i < count; ++i)
        data[i] = static_cast<float>(rank + static_cast<int>(i % 7));
      std::fill(received.begin(), received.end(), -1.0f);
    };
    // Counts the wrong elements of this rank's result: `length` elements at
    // `result`, the reduction of elements [first, first + length).
    const auto wrongIn = [&](const float* result, std::size_t first, std::size_t length) {
      long wrong = 0;
      for (std::size_t i = 0; i < length; ++i) {
        wrong += result[i] !=
                 static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>((first + i) % 7));
      }
      return wrong;
    };
    const auto scatter = [&](const std::vector<int>& counts) {
      return [&, counts] {
        MPI_Reduce_scatter(MPI_IN_PLACE, data.data(), counts.data(), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
      };
    };
    const auto reduces = [&](const std::vector<int>& counts, bool inPlace) {
      return [&, counts, inPlace] {
        std::size_t at = 0;
        for (int q = 0; q < n; ++q) {
          if (counts[q] == 0) continue;
          float* part = data.data() + at;
          if (inPlace) {
            MPI_Reduce(q == rank ? MPI_IN_PLACE : part, part, counts[q], MPI_FLOAT, MPI_SUM, q,
                       MPI_COMM_WORLD);
          } else {
            MPI_Reduce(part, received.data(), counts[q], MPI_FLOAT, MPI_SUM, q, MPI_COMM_WORLD);
          }
          at += static_cast<std::size_t>(counts[q]);
        }
      };
    };
    // Counts the wrong elements of this rank's part, where the call leaves
    // it: at the buffer's start (MPI_Reduce_scatter in place), where it lies
    // (MPI_Reduce in place) or in the other buffer.
    enum class Lands { kAtStart, kWhereItLies, kInReceived };
    const auto check = [&](const std::vector<int>& counts, Lands lands) {
      return [&, counts, lands] {
        std::size_t first = 0;
        for (int q = 0; q < rank; ++q)
          first += static_cast<std::size_t>(counts[q]);
        const float* result = lands == Lands::kAtStart       ? data.data()
                              : lands == Lands::kWhereItLies ? data.data() + first
                                                             : received.data();
        return wrongIn(result, first, static_cast<std::size_t>(counts[rank]));
      };
    };
    const std::vector<int> equal = partsFor(count, n, n), one = partsFor(count, n, 1),
                           half = partsFor(count, n, std::max(1, n / 2));
    struct Row {
      const char* name;
      Measured measured;
    };
    const Row rows[] = {
        {"equal",
         measure(o.iterations, o.warmup, fill, scatter(equal), check(equal, Lands::kAtStart))},
        {"one rank",
         measure(o.iterations, o.warmup, fill, scatter(one), check(one, Lands::kAtStart))},
        {"half",
         measure(o.iterations, o.warmup, fill, scatter(half), check(half, Lands::kAtStart))},
        {"one rank, MPI_Reduce", measure(o.iterations, o.warmup, fill, reduces(one, false),
                                         check(one, Lands::kInReceived))},
        {"... in place", measure(o.iterations, o.warmup, fill, reduces(one, true),
                                 check(one, Lands::kWhereItLies))},
        {"half, MPI_Reduce each", measure(o.iterations, o.warmup, fill, reduces(half, false),
                                          check(half, Lands::kInReceived))},
    };
    for (const Row& row : rows) {
      anyWrong += row.measured.wrong;
      if (rank == 0) {
        std::printf("%12zu  %-24s %12.1f %9.2f %7ld\n", bytes, row.name, row.measured.micros,
                    row.measured.micros / rows[0].measured.micros, row.measured.wrong);
      }
    }
  }
  if (rank == 0) std::printf("# wrong results: %ld\n", anyWrong);
  MPI_Finalize();
  return anyWrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
