// ddp_bench: data-parallel steps of a real model's gradient shapes, without
// the model. The real Reducer and MPI communicator reduce the gradients of a
// profile (benchmarks/model_profiles.h: ResNet-50, BERT-base, GPT-2 124M, the
// MLP) while backward is emulated by real compute: each layer's gradient is
// written by an SGEMM of 2 x (its parameters) x K flops, in reverse layer
// order, and marked ready as it would be in training; forward runs the same
// GEMMs into scratch, and the optimizer is a pass over parameters and
// gradients. K (--work) sets how much compute hides communication;
// --backward-ms calibrates it to a target backward time on one rank.
//
//   mpirun -np N ddp_bench --profile resnet50 [--bucket-cap-mb 1,5,25,100,inf,auto]
//       [--steps 10] [--warmup 3] [--work K | --backward-ms T] [--batch B] [--threads T]
//       [--json FILE]
//   ddp_bench --profile resnet50 --describe      (the profile's layers as JSON)
//
// For each cap (in MiB; inf: one bucket; auto: BucketCapTuner picks, Note
// [Automatic bucket cap]) it reports the median step of the slowest rank and
// its phases, samples/s (N x --batch per step: the batch is nominal, it only
// labels throughput), and the exposed communication fraction (the wait in
// Reducer::finalize over the step). After each cap's last step every rank's
// reduced gradients are compared (a hash, all-gathered): replicas that differ
// are counted as wrong, and the program then exits 1.
//
// The caps are measured side by side: one Reducer re-partitioned per step
// (Reducer::setBucketCaps), the caps taking turns in serpentine rounds, as
// the tuner does. On a machine whose speed drifts, measuring each cap in its
// own block of steps would credit the drift to the caps. With auto in the
// list, the tuner runs first (exactly as in ddp_train) and its choice then
// takes turns with the fixed caps, so "auto" and the fixed cap it chose are
// two samples of the same configuration: their difference is the noise.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/model_profiles.h"
#include "comm/bucket_tuner.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/reducer.h"
#include "runtime/cpu_share.h"
#include "runtime/error.h"
#include "runtime/world.h"
#include "trainer/mlp.h"

namespace ddp::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1 << 20;
constexpr std::size_t kAuto = 0;  // in the cap list: let the tuner choose
constexpr std::size_t kColumns = 256;

struct Options {
  std::string profile = "resnet50";
  std::vector<std::size_t> caps;  // bytes; comm::kSingleBucket; kAuto
  std::size_t steps = 10;
  std::size_t warmup = 3;
  std::size_t work = 8;
  double backwardMs = 0.0;
  std::size_t batch = 32;
  int threads = 0;  // BLAS threads per rank; 0: the rank's share (Note [Threads per rank])
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
      char* end = nullptr;
      const double mb = std::strtod(item.c_str(), &end);
      if (end == item.c_str() || *end != '\0' || !(mb > 0))
        throw UsageError(str("--bucket-cap-mb: bad cap '", item, "'"));
      caps.push_back(static_cast<std::size_t>(mb * kMiB));
    }
  }
  if (caps.empty()) throw UsageError("--bucket-cap-mb: no caps");
  return caps;
}

Options parse(int argc, char** argv) {
  Options o;
  o.caps = parseCaps("1,5,25,100,inf,auto");
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc && flag != "--describe") throw UsageError(str(flag, " needs a value"));
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    const auto count = [&] {
      const long long v = std::atoll(value.c_str());
      if (v <= 0) throw UsageError(str(flag, " must be a positive integer"));
      return static_cast<std::size_t>(v);
    };
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
      o.warmup = static_cast<std::size_t>(std::max(0LL, std::atoll(value.c_str())));
    } else if (flag == "--work") {
      o.work = count();
    } else if (flag == "--backward-ms") {
      o.backwardMs = std::atof(value.c_str());
    } else if (flag == "--batch") {
      o.batch = count();
    } else if (flag == "--threads") {
      o.threads = static_cast<int>(count());
    } else if (flag == "--json") {
      o.json = value;
    } else {
      throw UsageError(str("unknown option ", flag));
    }
  }
  makeProfile(o.profile);  // throws for an unknown name
  return o;
}

// The emulated model: parameters, and inputs for the GEMMs that stand in for
// each layer's forward and backward.
class EmulatedModel {
 public:
  EmulatedModel(const Profile& profile, int rank, std::size_t work) : profile_(profile) {
    for (const Layer& layer : profile_.layers) {
      for (const Tensor& t : layer.tensors)
        specs_.push_back({t.name, t.numel(), true});
    }
    parameters_.assign(profile_.parameterCount(), 0.01f);
    for (const Layer& layer : profile_.layers)
      largest_ = std::max(largest_, layer.numel());  // a layer holds its tensors
    random_.seed(static_cast<unsigned>(1234 + rank));
    setWork(work);
    scratch_.resize(largest_);
  }

  const std::vector<comm::GradientSpec>& specs() const { return specs_; }
  const Profile& profile() const { return profile_; }
  // A: (rows x K) for the largest layer; B: (K x kColumns). Rank-seeded, so
  // every rank's gradients differ, as in data-parallel training.
  void setWork(std::size_t work) {
    work_ = work;
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    a_.resize((largest_ / kColumns + 1) * work_);
    b_.resize(work_ * kColumns);
    for (float& v : a_)
      v = uniform(random_);
    for (float& v : b_)
      v = uniform(random_);
  }
  std::size_t work() const { return work_; }

  // out (n floats) = an SGEMM of 2 x n x K flops.
  void compute(float* out, std::size_t n) const {
    const std::size_t rows = n / kColumns, tail = n % kColumns;
    const int k = static_cast<int>(work_);
    if (rows > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(kColumns), k, 1.0f, a_.data(), k, b_.data(),
                  static_cast<int>(kColumns), 0.0f, out, static_cast<int>(kColumns));
    }
    if (tail > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, static_cast<int>(tail), k, 1.0f,
                  a_.data(), k, b_.data(), static_cast<int>(kColumns), 0.0f, out + rows * kColumns,
                  static_cast<int>(tail));
    }
  }

  void forward() {
    for (const Layer& layer : profile_.layers)
      compute(scratch_.data(), layer.numel());
  }

  // Writes each layer's gradients (last layer first) and marks them ready.
  void backward(comm::Reducer& reducer) {
    std::size_t index = specs_.size();
    for (std::size_t l = profile_.layers.size(); l-- > 0;) {
      const Layer& layer = profile_.layers[l];
      std::size_t first = index - layer.tensors.size();
      for (std::size_t t = first; t < index; ++t) {
        const std::span<float> gradient = reducer.gradient(t);
        compute(gradient.data(), gradient.size());
      }
      for (std::size_t t = first; t < index; ++t)
        reducer.markReady(t);
      index = first;
    }
  }

  void optimizerStep(comm::Reducer& reducer) {
    std::size_t offset = 0;
    for (std::size_t t = 0; t < specs_.size(); ++t) {
      const std::span<float> gradient = reducer.gradient(t);
      float* p = parameters_.data() + offset;
      for (std::size_t i = 0; i < gradient.size(); ++i)
        p[i] -= 1e-6f * gradient[i];
      offset += gradient.size();
    }
  }

 private:
  Profile profile_;
  std::size_t work_;
  std::vector<comm::GradientSpec> specs_;
  std::vector<float> parameters_;
  std::vector<float> a_, b_, scratch_;
  std::size_t largest_ = 0;  // elements of the largest layer
  std::mt19937 random_;
};

struct Phases {
  double forward = 0, backward = 0, comm = 0, optimizer = 0;
  double total() const { return forward + backward + comm + optimizer; }
};

double since(Clock::time_point& mark) {
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return s;
}

Phases runStep(EmulatedModel& model, comm::Reducer& reducer) {
  Phases p;
  auto mark = Clock::now();
  model.forward();
  p.forward = since(mark);
  reducer.prepareForBackward(true);
  model.backward(reducer);
  p.backward = since(mark);
  reducer.finalize();
  p.comm = since(mark);
  model.optimizerStep(reducer);
  p.optimizer = since(mark);
  return p;
}

comm::ReducerOptions reducerOptions(std::size_t cap) {
  comm::ReducerOptions r;
  r.bucketCapBytes = cap;
  r.firstBucketBytes = std::min<std::size_t>(std::size_t{1} << 20, cap);
  r.gradientsPreScaled = true;
  return r;
}

// FNV-1a over the reduced gradients' bytes.
std::uint64_t hashGradients(comm::Reducer& reducer, std::size_t tensors) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t t = 0; t < tensors; ++t) {
    const std::span<float> g = reducer.gradient(t);
    const auto* bytes = reinterpret_cast<const unsigned char*>(g.data());
    for (std::size_t i = 0; i < g.size_bytes(); ++i)
      h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

struct CapResult {
  std::string cap;
  std::size_t chosen = 0;  // the cap used (auto: the tuner's choice)
  std::size_t buckets = 0;
  std::vector<Phases> steps;  // this rank's timed steps
  Phases median;              // per phase: the median over steps of the slowest rank
  double stepSeconds = 0;
  int wrong = 0;
};

// The median over steps of the slowest rank's value.
double slowestMedian(std::vector<double> values) {
  std::vector<double> worst(values.size());
  MPI_Allreduce(values.data(), worst.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  std::nth_element(worst.begin(), worst.begin() + static_cast<long>(worst.size() / 2), worst.end());
  return worst[worst.size() / 2];
}

void useCap(comm::Reducer& reducer, std::size_t cap) {
  const comm::ReducerOptions r = reducerOptions(cap);
  reducer.setBucketCaps(r.firstBucketBytes, r.bucketCapBytes);
}

// Every replica must hold the same reduced gradients: the ranks whose hash
// differs from rank 0's.
int wrongReplicas(comm::Reducer& reducer, const comm::Communicator& comm) {
  const std::uint64_t mine = hashGradients(reducer, reducer.gradients().size());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  int wrong = 0;
  for (std::uint64_t h : all)
    wrong += h != all[0];
  return wrong;
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
    tuner.recordStep(runStep(model, reducer).total(), comm);
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
      const Phases p = runStep(model, reducer);
      if (round >= o.warmup) r.steps.push_back(p);
      if (round + 1 == rounds) r.wrong = wrongReplicas(reducer, comm);
    }
  }
  for (CapResult& r : results) {
    const auto phase = [&](double Phases::*field) {
      std::vector<double> values;
      for (const Phases& p : r.steps)
        values.push_back(p.*field);
      return slowestMedian(values);
    };
    std::vector<double> totals;
    for (const Phases& p : r.steps)
      totals.push_back(p.total());
    r.stepSeconds = slowestMedian(totals);
    r.median = {phase(&Phases::forward), phase(&Phases::backward), phase(&Phases::comm),
                phase(&Phases::optimizer)};
  }
}

// Scales --work so that one rank's backward takes about `targetMs`.
void calibrate(EmulatedModel& model, comm::Communicator& comm, double targetMs) {
  comm::Reducer reducer(comm, model.specs(), reducerOptions(comm::kSingleBucket));
  runStep(model, reducer);
  std::vector<double> times;
  for (int i = 0; i < 3; ++i)
    times.push_back(runStep(model, reducer).backward);
  double measured = slowestMedian(times) * 1e3;
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

int run(const Options& o) {
  World world;
  comm::MpiCommunicator comm(world.comm(), {});
  const CpuShare cpus = shareCpus(world);         // collective: every rank calls it
  const int threads = cpus.threadsOr(o.threads);  // Note [Threads per rank]
  trainer::setBlasThreads(threads);
  EmulatedModel model(makeProfile(o.profile), world.rank(), o.work);
  if (o.backwardMs > 0) calibrate(model, comm, o.backwardMs);
  const int n = world.size();
  const Profile& profile = model.profile();
  if (world.rank() == 0) {
    std::printf(
        "# ddp_bench: %s (%zu tensors, %.1fM parameters, %.1f MiB of gradients), %d ranks "
        "on %d node(s), mpi, %d BLAS thread(s) per rank, work K=%zu, batch %zu per rank, median of "
        "%zu steps per cap, the caps "
        "taking turns step by step after %zu warm-up rounds (slowest rank)\n",
        profile.name.c_str(), profile.tensorCount(),
        static_cast<double>(profile.parameterCount()) / 1e6,
        static_cast<double>(profile.parameterCount()) * 4 / kMiB, n, world.nodeCount(), threads,
        model.work(), o.batch, o.steps, o.warmup);
    std::printf("%8s %8s %8s %9s %9s %9s %9s %9s %11s %8s %6s\n", "cap(MiB)", "chosen", "buckets",
                "step(ms)", "fwd", "bwd", "comm", "opt", "samples/s", "exposed", "#wrong");
  }
  // One Reducer for every cap: the storage is allocated and paged in once.
  comm::Reducer reducer(comm, model.specs(), reducerOptions(comm::kSingleBucket));
  // The first steps of a process are slower (first touch of the parameters,
  // the GEMM inputs and shared memory; clocks ramping up): take them here,
  // so that neither the tuner nor the first cap pays for them.
  for (std::size_t s = 0; s < o.warmup + 2; ++s)
    runStep(model, reducer);
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
    wrong += r.wrong;
    const double samples = static_cast<double>(n * o.batch) / r.stepSeconds;
    const double exposed = r.median.comm / r.stepSeconds;
    if (world.rank() == 0) {
      const auto ms = [](double s) { return s * 1e3; };
      std::printf("%8s %8s %8zu %9.2f %9.2f %9.2f %9.2f %9.2f %11.1f %7.1f%% %6d\n", r.cap.c_str(),
                  capName(r.chosen).c_str(), r.buckets, ms(r.stepSeconds), ms(r.median.forward),
                  ms(r.median.backward), ms(r.median.comm), ms(r.median.optimizer), samples,
                  100 * exposed, r.wrong);
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
                            {"wrong", r.wrong}};
    if (r.cap == "auto") {
      entry["tuning_steps"] = tuning.steps;
      entry["tuner_median_ms"] = nlohmann::json::array();
      for (double m : tuning.medians)
        entry["tuner_median_ms"].push_back(m * 1e3);
    }
    results.push_back(entry);
  }
  if (world.rank() == 0 && tuning.steps > 0) {
    std::printf("# auto: %zu tuning steps, median step of the slowest rank per candidate:",
                tuning.steps);
    const std::vector<std::size_t> candidates = comm::BucketCapTuner::defaultCandidates();
    for (std::size_t i = 0; i < candidates.size(); ++i)
      std::printf(" %s %.2f ms", capName(candidates[i]).c_str(), tuning.medians[i] * 1e3);
    std::printf("; chose %s\n", capName(tuning.chosen).c_str());
  }
  if (world.rank() == 0 && !o.json.empty()) {
    const nlohmann::json doc = {{"profile", profile.name},
                                {"tensors", profile.tensorCount()},
                                {"parameters", profile.parameterCount()},
                                {"ranks", n},
                                {"nodes", world.nodeCount()},
                                {"work", model.work()},
                                {"blas_threads", threads},
                                {"batch", o.batch},
                                {"steps", o.steps},
                                {"results", results}};
    std::ofstream(o.json) << doc.dump(1) << '\n';
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ddp::bench

int main(int argc, char** argv) {
  ddp::bench::Options options;
  try {
    options = ddp::bench::parse(argc, argv);
  } catch (const ddp::UsageError& e) {
    std::fprintf(stderr, "ddp_bench: %s\n", e.what());
    return 2;
  }
  if (options.describe) {
    std::printf("%s\n", ddp::bench::describeProfile(options.profile).dump(1).c_str());
    return 0;
  }
  return ddp::bench::run(options);
}
