// gather_bench: what gathering one batch of Fashion-MNIST costs the host, on
// one thread, on threads started for each batch (DeviceBatches before Note
// [Threads kept for the batch gather]), and on threads kept between batches
// (ParallelFor, as DeviceBatches gathers now). Batches are consecutive
// slices of a shuffled epoch, as the sampler hands them out; the output
// buffer is reused. Rounds take the three ways in turn; each figure is the
// median over rounds of a round's median batch.
//
//   build/benchmarks/gather_bench [--data-dir DIR] [--batches 256,4096]
//       [--threads 2,16] [--calls 200] [--rounds 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/command_line.h"
#include "runtime/parallel_for.h"
#include "trainer/fashion_mnist.h"

namespace {

using ddp::trainer::Dataset;
// DeviceBatches' threshold before: smaller batches were gathered on one thread.
constexpr std::size_t kParallelGatherFloats = std::size_t{1} << 20;

// "256,4096": whole numbers of at least 1, or BadCommandLine naming `flag`.
std::vector<std::size_t> listOf(const std::string& flag, const std::string& text) {
  std::vector<std::size_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const std::optional<int> value = ddp::bench::parseCount(item.c_str(), 1);
    if (!value) {
      throw ddp::bench::BadCommandLine(flag + " " + text +
                                       ": not a list of whole numbers of at least 1");
    }
    values.push_back(static_cast<std::size_t>(*value));
  }
  if (values.empty()) throw ddp::bench::BadCommandLine(flag + ": an empty list");
  return values;
}

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// The gather as DeviceBatches ran it before: threads started per batch.
void gatherStartingThreads(const Dataset& data, std::span<const std::size_t> indices,
                           float* features, std::int32_t* labels, unsigned threads) {
  const std::size_t rows = indices.size(), dim = data.featureDim();
  if (threads <= 1 || rows * dim < kParallelGatherFloats) {
    data.gather(indices, features, labels);
    return;
  }
  const std::size_t perThread = (rows + threads - 1) / threads;
  std::vector<std::jthread> workers;
  for (std::size_t begin = 0; begin < rows; begin += perThread) {
    const std::size_t count = std::min(perThread, rows - begin);
    workers.emplace_back([&, begin, count] {
      data.gather(indices.subspan(begin, count), features + begin * dim, labels + begin);
    });
  }
}

constexpr ddp::bench::ToolText kText{
    "gather_bench",
    "usage: gather_bench [--data-dir DIR] [--batches 256,4096] [--threads 2,16] [--calls 200]\n"
    "    [--rounds 5]\n",
    "What gathering one batch of Fashion-MNIST's training set (in DIR; default: Debian's\n"
    "dataset-fashion-mnist) costs the host: on one thread, on threads started for each\n"
    "batch, and on threads kept between batches, as ddp_train gathers them. For each\n"
    "batch size in --batches and thread count in --threads, --calls batches a round,\n"
    "the rounds taking the three ways in turn; the median over --rounds of a round's\n"
    "median batch.\n"};

int run(const std::vector<std::string>& args) {
  using ddp::bench::BadCommandLine;
  std::string dir = ddp::trainer::kDefaultFashionMnistDir;
  std::vector<std::size_t> batches{256, 4096}, threadCounts{2, 16};
  std::size_t calls = 200, rounds = 5;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (flag != "--data-dir" && flag != "--batches" && flag != "--threads" && flag != "--calls" &&
        flag != "--rounds")
      throw BadCommandLine("unknown option " + flag);
    if (i + 1 >= args.size()) throw BadCommandLine(flag + " needs a value");
    const std::string& value = args[i + 1];
    if (flag == "--data-dir")
      dir = value;
    else if (flag == "--batches")
      batches = listOf(flag, value);
    else if (flag == "--threads")
      threadCounts = listOf(flag, value);
    else
      (flag == "--calls" ? calls : rounds) =
          static_cast<std::size_t>(ddp::bench::wholeNumber(value, 1, flag));
  }
  std::unique_ptr<ddp::trainer::Dataset> data;
  try {
    data = ddp::trainer::loadFashionMnist(dir, ddp::trainer::Split::kTrain);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gather_bench: %s (--data-dir DIR)\n", e.what());
    return 1;
  }
  std::vector<std::size_t> order(data->size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  const std::size_t dim = data->featureDim();
  std::printf(
      "gather_bench: %s, %zu samples of %zu floats; %zu batches per round, %zu rounds; "
      "%u hardware threads\n\n",
      data->name().c_str(), data->size(), dim, calls, rounds, std::thread::hardware_concurrency());
  std::printf(
      "| batch | threads | one thread (us) | started per batch (us) | kept (us) | "
      "kept / started |\n|---:|---:|---:|---:|---:|---:|\n");
  int wrong = 0;
  for (const std::size_t batch : batches) {
    std::vector<float> expected(batch * dim), features(batch * dim);
    std::vector<std::int32_t> expectedLabels(batch), labels(batch);
    for (const std::size_t threads : threadCounts) {
      ddp::ParallelFor pool(static_cast<unsigned>(threads));
      std::vector<double> perWay[3];
      for (std::size_t round = 0; round < rounds; ++round) {
        for (int way = 0; way < 3; ++way) {
          std::vector<double> times;
          for (std::size_t call = 0; call < calls; ++call) {
            const std::size_t first = (call * batch) % (order.size() - batch + 1);
            const std::span<const std::size_t> indices(order.data() + first, batch);
            const auto start = std::chrono::steady_clock::now();
            if (way == 0) {
              data->gather(indices, features.data(), labels.data());
            } else if (way == 1) {
              gatherStartingThreads(*data, indices, features.data(), labels.data(),
                                    static_cast<unsigned>(threads));
            } else {
              ddp::trainer::gatherInParallel(*data, indices, features.data(), labels.data(), pool);
            }
            times.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
            if (round == 0 && call == 0) {  // each way gathers the same rows
              data->gather(indices, expected.data(), expectedLabels.data());
              if (features != expected || labels != expectedLabels) {
                std::printf("WRONG: way %d, batch %zu, threads %zu\n", way, batch, threads);
                ++wrong;
              }
            }
          }
          perWay[way].push_back(median(times));
        }
      }
      const double one = median(perWay[0]), started = median(perWay[1]), kept = median(perWay[2]);
      std::printf("| %zu | %zu | %.1f | %.1f | %.1f | %.2fx |\n", batch, threads, one, started,
                  kept, kept / started);
    }
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
