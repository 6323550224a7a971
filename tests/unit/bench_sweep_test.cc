// The MPI benchmarks' command-line sweep (benchmarks/mpi_bench.h): sizes as
// nccl-tests writes them, and every bad value named rather than run or
// reduced to a bare usage line.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "benchmarks/mpi_bench.h"

namespace ddp::bench {
namespace {

TEST(BenchSweep, SizesInNcclTestsForms) {
  EXPECT_EQ(parseSize("8"), 8u);
  EXPECT_EQ(parseSize("64K"), 64u << 10);
  EXPECT_EQ(parseSize("4m"), 4u << 20);
  EXPECT_EQ(parseSize("1G"), 1u << 30);
  EXPECT_EQ(parseSize("1.5K"), 1536u);
  for (const char* bad : {"", "x", "8x", "1T", "-4", "4KB", "nan", "1e30"})
    EXPECT_EQ(parseSize(bad), std::nullopt) << bad;
}

TEST(BenchSweep, CountsAreWholeNumbersFromTheirLeast) {
  EXPECT_EQ(parseCount("20", 1), 20);
  EXPECT_EQ(parseCount("0", 0), 0);
  for (const char* bad : {"0", "", "2.5", "-1", "3x", "99999999999"})
    EXPECT_EQ(parseCount(bad, 1), std::nullopt) << bad;
}

TEST(BenchSweep, PositiveNumbersUpToTheirMost) {
  EXPECT_EQ(parsePositive("2.5", 10), 2.5);
  for (const char* bad : {"0", "-1", "x", "3ms", "11", "nan", ""})
    EXPECT_EQ(parsePositive(bad, 10), std::nullopt) << bad;
}

std::string problemOf(const std::vector<std::pair<std::string, std::string>>& flags) {
  Sweep sweep;
  try {
    for (const auto& [flag, value] : flags)
      EXPECT_TRUE(sweep.take(flag, value.c_str())) << flag;
    sweep.check();
  } catch (const BadCommandLine& e) {
    return e.what();
  }
  return "accepted";
}

TEST(BenchSweep, ABadSweepIsNamed) {
  EXPECT_EQ(problemOf({{"-b", "8"}, {"-e", "256M"}, {"-f", "2"}, {"-n", "20"}, {"-w", "5"}}),
            "accepted");
  EXPECT_EQ(problemOf({{"-b", "8"}, {"-e", "4"}}),
            "-e 4 is below -b 8: the sweep goes from -b up to -e");
  EXPECT_EQ(problemOf({{"-b", "2"}}), "-b 2: below one float (4 bytes)");
  EXPECT_EQ(problemOf({{"-f", "1"}}), "-f 1: the factor between sizes must be at least 2");
  EXPECT_EQ(problemOf({{"-b", "8x"}}), "-b 8x: not a size (8, 64K, 4M, 1G)");
  EXPECT_EQ(problemOf({{"-n", "0"}}), "-n 0: not a whole number of at least 1");
  EXPECT_EQ(problemOf({{"-w", "-1"}}), "-w -1: not a whole number of at least 0");
  Sweep sweep;
  EXPECT_FALSE(sweep.take("--memory", "plain"));  // not the sweep's: the benchmark's own
}

}  // namespace
}  // namespace ddp::bench
