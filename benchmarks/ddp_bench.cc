// ddp_bench: data-parallel steps of a real model's gradient shapes, without
// the model. The real Reducer and communicator reduce the gradients of a
// profile (benchmarks/model_profiles.h: ResNet-50, BERT-base, GPT-2 124M, the
// MLP) while backward is emulated by real compute (benchmarks/emulated_model.h):
// each layer's gradient is written by an SGEMM of 2 x (its parameters) x K
// flops, in reverse layer order, and marked ready as in training. K (--work)
// sets how much compute hides communication; --backward-ms calibrates it to a
// target backward time on one rank. --device cuda runs it on each rank's GPU
// (cuBLAS, the NCCL backend; one GPU per rank, as ddp_train picks them), with
// phase times from events on the compute stream.
//
//   mpirun -np N ddp_bench --profile resnet50 [--bucket-cap-mb 1,5,25,100,inf,auto]
//       [--steps 10] [--warmup 3] [--work K | --backward-ms T] [--batch B] [--threads T]
//       [--device cpu|cuda] [--grad-compression none|bf16] [--json FILE]
//   ddp_bench --profile resnet50 --describe      (the profile's layers as JSON)
//
// For each cap (in MiB; inf: one bucket; auto: BucketCapTuner picks, Note
// [Automatic bucket cap]) it reports the median step of the slowest rank and
// its phases, samples/s (N x --batch per step: the batch is nominal, it only
// labels throughput), and the exposed communication fraction (the wait in
// Reducer::finalize over the step). After each cap's last step every rank's
// reduced gradients are compared (a hash, all-gathered): replicas that differ
// are counted as wrong, and the program then exits 1. --grad-compression
// bf16 reduces as ddp_train's option does (comm/reducer.h, GradCompression).
//
// The caps are measured side by side: one Reducer re-partitioned per step
// (Reducer::setBucketCaps), the caps taking turns in serpentine rounds, as
// the tuner does. On a machine whose speed drifts, measuring each cap in its
// own block of steps would credit the drift to the caps. With auto in the
// list, the tuner runs first (exactly as in ddp_train) and its choice then
// takes turns with the fixed caps, so "auto" and the fixed cap it chose are
// two samples of the same configuration: their difference is the noise.
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/emulated_model.h"
#include "benchmarks/model_profiles.h"
#include "benchmarks/mpi_bench.h"
#include "comm/bucket_tuner.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/reducer.h"
#include "ddp_config.h"
#include "launcher/options.h"
#include "launcher/placement.h"
#include "runtime/cpu_share.h"
#include "runtime/error.h"
#include "runtime/signals.h"
#include "runtime/world.h"
#include "trainer/blas_kernels.h"
#include "trainer/mlp.h"
#include "trainer/tensor.h"

namespace ddp::bench {
namespace {

constexpr double kMiB = 1 << 20;
constexpr std::size_t kAuto = 0;  // in the cap list: let the tuner choose

struct Options {
  std::string profile = "resnet50";
  std::vector<std::size_t> caps;  // bytes; comm::kSingleBucket; kAuto
  std::size_t steps = 10;
  std::size_t warmup = 3;
  std::size_t work = 8;
  double backwardMs = 0.0;
  std::size_t batch = 32;
  int threads = 0;    // BLAS threads per rank; 0: the rank's share (Note [Threads per rank])
  bool cuda = false;  // --device cuda
  comm::GradCompression compression = comm::GradCompression::kNone;
  std::string json;
  bool describe = false;  // print the profile as JSON and exit (no MPI)
};

std::string capName(std::size_t cap) {
  if (cap == kAuto) return "auto";
  if (cap == comm::kSingleBucket) return "single";
  std::ostringstream out;
  out << static_cast<double>(cap) / kMiB;
  return out.str();
}

std::vector<std::size_t> parseCaps(const std::string& text) {
  std::vector<std::size_t> caps;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "auto") {
      caps.push_back(kAuto);
    } else if (item == "inf" || item == "single") {
      caps.push_back(comm::kSingleBucket);
    } else {
      const std::optional<double> mb = parsePositive(item.c_str(), 1e9);
      if (!mb) {
        throw UsageError(str("--bucket-cap-mb: bad cap '", item,
                             "' (each a size in MiB above 0, inf for one bucket, or auto)"));
      }
      caps.push_back(static_cast<std::size_t>(*mb * kMiB));
    }
  }
  if (caps.empty()) throw UsageError("--bucket-cap-mb: no caps");
  return caps;
}

constexpr const char* kUsage =
    "usage: mpirun -np N ddp_bench [--profile resnet50|bert-base|gpt2|mlp]\n"
    "    [--bucket-cap-mb 1,5,25,100,inf,auto] [--steps 10] [--warmup 3]\n"
    "    [--work K | --backward-ms T] [--batch B] [--threads T] [--device cpu|cuda]\n"
    "    [--grad-compression none|bf16] [--json FILE]\n"
    "       ddp_bench --profile P --describe      (the profile's layers as JSON)\n";

// --help: after the usage, each option with its default and what the
// columns mean.
constexpr const char* kAbout =
    "Data-parallel steps of a real model's gradient shapes, without the model: the real\n"
    "Reducer and communicator reduce the gradients of a profile while each layer's\n"
    "backward is emulated by an SGEMM, in reverse layer order, each gradient marked ready\n"
    "as in training. The bucket caps take turns step by step; after each cap's last\n"
    "step every rank's reduced gradients are compared (replicas that differ: #wrong,\n"
    "and exit code 1).\n"
    "\n"
    "Options [default]:\n"
    "  --profile NAME          whose parameter tensors: resnet50 (161 tensors, 25.6M\n"
    "                          parameters) | bert-base (199, 109.5M) | gpt2 (148, 124.4M)\n"
    "                          | mlp (ddp_train's default MLP) [resnet50]\n"
    "  --bucket-cap-mb LIST    the caps to compare, in MiB; inf (or single): one bucket;\n"
    "                          auto: the cap ddp_train's --bucket-cap-mb auto picks\n"
    "                          [1,5,25,100,inf,auto]\n"
    "  --steps N               timed steps per cap [10]\n"
    "  --warmup N              untimed steps per cap before them [3]\n"
    "  --work K                each layer's backward: an SGEMM of 2 x (its parameters) x K\n"
    "                          flops; more compute hides more communication [8]\n"
    "  --backward-ms T         instead of --work: the K that makes one rank's backward\n"
    "                          take T ms\n"
    "  --batch B               samples per rank per step; it only labels samples/s [32]\n"
    "  --threads T             BLAS threads per rank [the rank's share of the node's CPUs]\n"
    "  --device NAME           cpu | cuda (one GPU per rank: cuBLAS, the NCCL backend)\n"
    "                          [cpu]\n"
    "  --grad-compression NAME none | bf16 (as ddp_train's option) [none]\n"
    "  --json FILE             also write every cap's figures to FILE\n"
    "  --describe              print the profile's layers as JSON and exit (no mpirun)\n"
    "  -h, --help              print this help and exit\n"
    "\n"
    "Columns, per cap: chosen is the cap used (auto: the one picked); step(ms) the median\n"
    "step of the slowest rank, and fwd, bwd, comm (the wait for the all-reduces after\n"
    "backward) and opt its phases; samples/s = ranks x --batch / step; exposed = comm /\n"
    "step, the communication backward did not hide. Weak scaling: run it at np=1 and\n"
    "np=N with the same options and compare samples/s (benchmarks/scaling_bench.py).\n";

// The flags that take a value.
constexpr const char* kValueFlags[] = {"--profile", "--bucket-cap-mb",    "--steps", "--warmup",
                                       "--work",    "--backward-ms",      "--batch", "--threads",
                                       "--device",  "--grad-compression", "--json"};

Options parse(int argc, char** argv) {
  Options o;
  o.caps = parseCaps("1,5,25,100,inf,auto");
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const bool takesValue =
        std::find(std::begin(kValueFlags), std::end(kValueFlags), flag) != std::end(kValueFlags);
    if (!takesValue && flag != "--describe") throw UsageError(str("unknown option ", flag));
    if (takesValue && i + 1 >= argc) throw UsageError(str(flag, " needs a value"));
    const std::string value = takesValue ? argv[i + 1] : "";
    const auto whole = [&](int least) {
      const std::optional<int> v = parseCount(value.c_str(), least);
      if (!v)
        throw UsageError(
            str(flag, " must be a whole number of at least ", least, " (got ", value, ")"));
      return *v;
    };
    const auto count = [&] { return static_cast<std::size_t>(whole(1)); };
    if (flag == "--describe") {
      o.describe = true;
      --i;  // takes no value
    } else if (flag == "--profile") {
      o.profile = value;
    } else if (flag == "--bucket-cap-mb") {
      o.caps = parseCaps(value);
    } else if (flag == "--steps") {
      o.steps = count();
    } else if (flag == "--warmup") {
      o.warmup = static_cast<std::size_t>(whole(0));
    } else if (flag == "--work") {
      o.work = count();
    } else if (flag == "--backward-ms") {
      const std::optional<double> ms = parsePositive(value.c_str(), 1e6);
      if (!ms)
        throw UsageError(str("--backward-ms must be a time in ms above 0 (got ", value, ")"));
      o.backwardMs = *ms;
    } else if (flag == "--batch") {
      o.batch = count();
    } else if (flag == "--threads") {
      o.threads = static_cast<int>(count());
    } else if (flag == "--device") {
      if (value != "cpu" && value != "cuda") throw UsageError("--device must be cpu or cuda");
      o.cuda = value == "cuda";
    } else if (flag == "--grad-compression") {
      if (value != "none" && value != "bf16")
        throw UsageError(str("--grad-compression: unknown '", value, "' (known: none, bf16)"));
      o.compression = value == "bf16" ? comm::GradCompression::kBf16 : comm::GradCompression::kNone;
    } else if (flag == "--json") {
      o.json = value;
    }
  }
  makeProfile(o.profile);  // throws for an unknown name
  return o;
}

// The first bucket of a Reducer with cap `cap`: 1 MiB, or the cap if smaller.
std::size_t firstBucketBytes(std::size_t cap) {
  return std::min<std::size_t>(std::size_t{1} << 20, cap);
}

comm::ReducerOptions reducerOptions(std::size_t cap, comm::GradCompression compression) {
  comm::ReducerOptions r;
  r.bucketCapBytes = cap;
  r.firstBucketBytes = firstBucketBytes(cap);
  r.gradientsPreScaled = true;
  r.compression = compression;
  return r;
}

const char* compressionName(comm::GradCompression compression) {
  return compression == comm::GradCompression::kBf16 ? "bf16" : "none";
}

// What a cap's reduced gradients were, after its last step.
struct GradientCheck {
  int wrong = 0;      // ranks whose gradients differ from rank 0's (by hash)
  double norm = 0.0;  // the L2 norm of all of them: the same for every cap and
                      // every backend, up to rounding (tests/e2e/gpu_ddp_bench.sh)
};

struct CapResult {
  std::string cap;
  std::size_t chosen = 0;  // the cap used (auto: the tuner's choice)
  std::size_t buckets = 0;
  std::vector<Phases> steps;  // this rank's timed steps
  Phases median;              // per phase: the median over steps of the slowest rank
  double stepSeconds = 0;
  GradientCheck check;
};

void useCap(comm::Reducer& reducer, std::size_t cap) {
  reducer.setBucketCaps(firstBucketBytes(cap), cap);
}

// Every replica must hold the same reduced gradients.
GradientCheck checkGradients(EmulatedModel& model, comm::Reducer& reducer,
                             const comm::Communicator& comm) {
  // FNV-1a over the floats' bit patterns (a float at a time: bitwise equal
  // replicas hash alike, in a quarter of the steps of byte by byte).
  std::uint64_t hash = 1469598103934665603ull;
  double squares = 0.0;
  std::vector<float> staging;
  for (std::size_t t = 0; t < model.specs().size(); ++t) {
    for (float v : model.hostGradient(reducer, t, staging)) {
      hash = (hash ^ std::bit_cast<std::uint32_t>(v)) * 1099511628211ull;
      squares += static_cast<double>(v) * v;
    }
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  GradientCheck check;
  for (std::uint64_t h : all)
    check.wrong += h != all[0];
  check.norm = std::sqrt(squares);
  return check;
}

struct Tuning {
  std::size_t chosen = 0;
  std::size_t steps = 0;
  std::vector<double> medians;
};

// --bucket-cap-mb auto, as ddp_train runs it.
Tuning tune(EmulatedModel& model, comm::Reducer& reducer, comm::Communicator& comm) {
  Tuning t;
  comm::BucketCapTuner tuner(comm::BucketCapTuner::defaultCandidates());
  while (tuner.tuning()) {
    useCap(reducer, tuner.currentCap());
    tuner.recordStep(model.step(reducer).total(), comm);
    ++t.steps;
  }
  t.chosen = tuner.chosen();
  t.medians = tuner.medians();
  return t;
}

// Every entry of `results` (its `chosen` cap set) gets o.warmup untimed and
// o.steps timed steps; the entries take turns in serpentine rounds.
void measureSideBySide(std::vector<CapResult>& results, EmulatedModel& model,
                       comm::Reducer& reducer, comm::Communicator& comm, const Options& o) {
  const std::size_t rounds = o.warmup + o.steps;
  for (std::size_t round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      CapResult& r = results[round % 2 == 0 ? i : results.size() - 1 - i];
      useCap(reducer, r.chosen);
      r.buckets = reducer.buckets().size();
      const Phases p = model.step(reducer);
      if (round >= o.warmup) r.steps.push_back(p);
      if (round + 1 == rounds) r.check = checkGradients(model, reducer, comm);
    }
  }
  for (CapResult& r : results) {
    const auto phase = [&](double Phases::*field) {
      std::vector<double> values;
      for (const Phases& p : r.steps)
        values.push_back(p.*field);
      return slowestRankMedian(values);
    };
    std::vector<double> totals;
    for (const Phases& p : r.steps)
      totals.push_back(p.total());
    r.stepSeconds = slowestRankMedian(totals);
    r.median = {phase(&Phases::forward), phase(&Phases::backward), phase(&Phases::comm),
                phase(&Phases::optimizer)};
  }
}

// Scales --work so that one rank's backward takes about `targetMs`.
void calibrate(EmulatedModel& model, comm::Communicator& comm, double targetMs) {
  comm::Reducer reducer(comm, model.specs(),
                        reducerOptions(comm::kSingleBucket, comm::GradCompression::kNone));
  model.step(reducer);
  std::vector<double> times;
  for (int i = 0; i < 3; ++i)
    times.push_back(model.step(reducer).backward);
  double measured = slowestRankMedian(times) * 1e3;
  const double scaled = static_cast<double>(model.work()) * targetMs / measured;
  model.setWork(static_cast<std::size_t>(std::max(1.0, std::round(scaled))));
}

// The profile's layers and their tensors' sizes, for benchmarks/cost_model.py.
nlohmann::json describeProfile(const std::string& name) {
  const Profile profile = makeProfile(name);
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& layer : profile.layers) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const Tensor& t : layer.tensors)
      tensors.push_back(t.numel());
    layers.push_back({{"name", layer.name}, {"tensors", tensors}});
  }
  return {{"profile", profile.name},
          {"parameters", profile.parameterCount()},
          {"tensors", profile.tensorCount()},
          {"layers", layers}};
}

std::unique_ptr<EmulatedModel> makeModel(const Options& o, int rank) {
#if DDP_WITH_CUDA
  if (o.cuda) return makeDeviceModel(makeProfile(o.profile), rank, o.work);
#endif
  return makeHostModel(makeProfile(o.profile), rank, o.work);
}

// One cap's row of the table (printed when `print`) and its JSON entry.
nlohmann::json reportCap(const CapResult& r, const Tuning& tuning, int ranks, const Options& o,
                         bool print) {
  const double samples =
      static_cast<double>(static_cast<std::size_t>(ranks) * o.batch) / r.stepSeconds;
  const double exposed = r.median.comm / r.stepSeconds;
  if (print) {
    const auto ms = [](double s) { return s * 1e3; };
    std::printf("%8s %8s %8zu %9.2f %9.2f %9.2f %9.2f %9.2f %11.1f %7.1f%% %6d\n", r.cap.c_str(),
                capName(r.chosen).c_str(), r.buckets, ms(r.stepSeconds), ms(r.median.forward),
                ms(r.median.backward), ms(r.median.comm), ms(r.median.optimizer), samples,
                100 * exposed, r.check.wrong);
    std::fflush(stdout);
  }
  nlohmann::json entry = {{"cap", r.cap},
                          {"chosen", capName(r.chosen)},
                          {"buckets", r.buckets},
                          {"step_ms", r.stepSeconds * 1e3},
                          {"forward_ms", r.median.forward * 1e3},
                          {"backward_ms", r.median.backward * 1e3},
                          {"comm_ms", r.median.comm * 1e3},
                          {"optimizer_ms", r.median.optimizer * 1e3},
                          {"samples_per_s", samples},
                          {"exposed_fraction", exposed},
                          {"wrong", r.check.wrong},
                          {"gradient_norm", r.check.norm}};
  if (r.cap == "auto") {
    entry["tuning_steps"] = tuning.steps;
    entry["tuner_median_ms"] = nlohmann::json::array();
    for (double m : tuning.medians)
      entry["tuner_median_ms"].push_back(m * 1e3);
  }
  return entry;
}

// What the tuner measured and chose.
void printTuning(const Tuning& tuning) {
  std::printf("# auto: %zu tuning steps, median step of the slowest rank per candidate:",
              tuning.steps);
  const std::vector<std::size_t> candidates = comm::BucketCapTuner::defaultCandidates();
  for (std::size_t i = 0; i < candidates.size(); ++i)
    std::printf(" %s %.2f ms", capName(candidates[i]).c_str(), tuning.medians[i] * 1e3);
  std::printf("; chose %s\n", capName(tuning.chosen).c_str());
}

int runOn(const World& world, const Options& o) {
  // The GPU and communicator as ddp_train picks them (launcher/placement.h):
  // one GPU per rank, agreed on by every rank before any starts NCCL. Of
  // ddp_train's options only --device matters to the placement.
  launcher::Options placementOptions;
  placementOptions.device = o.cuda ? "cuda" : "cpu";
  const launcher::Placement placement = launcher::choosePlacement(placementOptions, world);
  if (!placement.error.empty()) {
    if (placement.printsError) std::fprintf(stderr, "ddp_bench: %s\n", placement.error.c_str());
    return 2;
  }
  const std::unique_ptr<comm::Communicator> communicator =
      launcher::makeCommunicator(placement, world, {}, [&world](const CommError& error) {
        std::fprintf(stderr, "ddp_bench: %s\n", error.what());
        world.abort(1);
      });
  comm::Communicator& comm = *communicator;
  const CpuShare cpus = shareCpus(world);  // collective: every rank calls it
  const int threads =
      chooseThreads(o.threads, cpus, std::getenv).threads;  // Note [Threads per rank]
  trainer::setBlasThreads(threads);
  const std::unique_ptr<EmulatedModel> modelOwner = makeModel(o, world.rank());
  EmulatedModel& model = *modelOwner;
  if (o.backwardMs > 0) calibrate(model, comm, o.backwardMs);
  const int n = world.size();
  const Profile& profile = model.profile();
  if (world.rank() == 0) {
    std::printf(
        "# ddp_bench: %s (%zu tensors, %.1fM parameters, %.1f MiB of gradients), %d ranks "
        "on %d node(s), backend %s, device %s, --grad-compression %s, %d BLAS thread(s) per "
        "rank (%s), work K=%zu, batch %zu per rank, median of "
        "%zu steps per cap, the caps "
        "taking turns step by step after %zu warm-up rounds (slowest rank)\n",
        profile.name.c_str(), profile.tensorCount(),
        static_cast<double>(profile.parameterCount()) / 1e6,
        static_cast<double>(profile.parameterCount()) * 4 / kMiB, n, world.nodeCount(),
        comm.backendName().c_str(), placement.summary.c_str(), compressionName(o.compression),
        threads, trainer::describe(trainer::blasKernels()).c_str(), model.work(), o.batch, o.steps,
        o.warmup);
    std::printf("%8s %8s %8s %9s %9s %9s %9s %9s %11s %8s %6s\n", "cap(MiB)", "chosen", "buckets",
                "step(ms)", "fwd", "bwd", "comm", "opt", "samples/s", "exposed", "#wrong");
  }
  // One Reducer for every cap: the storage is allocated and paged in once.
  comm::Reducer reducer(comm, model.specs(), reducerOptions(comm::kSingleBucket, o.compression));
  // The first steps of a process are slower (first touch of the parameters,
  // the GEMM inputs and shared memory; clocks ramping up): take them here,
  // so that neither the tuner nor the first cap pays for them.
  for (std::size_t s = 0; s < o.warmup + 2; ++s)
    model.step(reducer);
  Tuning tuning;
  if (std::find(o.caps.begin(), o.caps.end(), kAuto) != o.caps.end()) {
    tuning = tune(model, reducer, comm);
  }
  std::vector<CapResult> measured;
  for (std::size_t cap : o.caps) {
    CapResult r;
    r.cap = capName(cap);
    r.chosen = cap == kAuto ? tuning.chosen : cap;
    measured.push_back(std::move(r));
  }
  measureSideBySide(measured, model, reducer, comm, o);
  nlohmann::json results = nlohmann::json::array();
  int wrong = 0;
  for (const CapResult& r : measured) {
    wrong += r.check.wrong;
    results.push_back(reportCap(r, tuning, n, o, world.rank() == 0));
  }
  if (world.rank() == 0 && tuning.steps > 0) printTuning(tuning);
  if (world.rank() == 0 && !o.json.empty()) {
    const nlohmann::json doc = {{"profile", profile.name},
                                {"tensors", profile.tensorCount()},
                                {"parameters", profile.parameterCount()},
                                {"ranks", n},
                                {"nodes", world.nodeCount()},
                                {"backend", comm.backendName()},
                                {"device", o.cuda ? "cuda" : "cpu"},
                                {"grad_compression", compressionName(o.compression)},
                                {"work", model.work()},
                                {"blas_threads", threads},
                                {"blas", trainer::describe(trainer::blasKernels())},
                                {"batch", o.batch},
                                {"steps", o.steps},
                                {"results", results}};
    std::ofstream(o.json) << doc.dump(1) << '\n';
  }
  return wrong == 0 ? 0 : 1;
}

// A failure on one rank (NCCL or CUDA, a broken invariant) may leave the
// others blocked in a collective: report it, naming the rank, and end the job.
int run(const Options& o) {
  World world;
  try {
    return runOn(world, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_bench: rank %d: %s\n", world.rank(), e.what());
    world.abort(1);
  }
}

}  // namespace
}  // namespace ddp::bench

int main(int argc, char** argv) {
  // Note [OpenBLAS kernels on CPUs newer than the library] in trainer/blas_kernels.h.
  ddp::trainer::fitBlasKernelsToCpu();
  ddp::installBrokenPipeHandler();  // Note [Broken pipes] in runtime/signals.h
  const ddp::bench::ToolText text{"ddp_bench", ddp::bench::kUsage, ddp::bench::kAbout};
  return ddp::bench::runTool(text, argc, argv, [&](const std::vector<std::string>&) {
    ddp::bench::Options options;
    try {
      options = ddp::bench::parse(argc, argv);
    } catch (const ddp::UsageError& e) {
      throw ddp::bench::BadCommandLine(e.what());
    }
    if (options.cuda && !ddp::trainer::cudaBuild()) {
      // Not a mistake in the command (no usage after it): the line a GPU
      // test's probe reads to skip (tests/e2e/lib.sh, skip_without_cuda).
      std::fputs("ddp_bench: --device cuda: this ddp_bench was built without CUDA\n", stderr);
      return 2;
    }
    if (options.describe) {
      std::printf("%s\n", ddp::bench::describeProfile(options.profile).dump(1).c_str());
      return 0;
    }
    return ddp::bench::run(options);
  });
}
