// allreduce_bench: float32 sum all-reduce (all-gather, reduce-scatter) through ddp's
// Communicator, swept over sizes, in the table format of nccl-tests, with the
// library's own call measured in the same run so the cost of our layer is a
// ratio.
//
//   mpirun -np N allreduce_bench [-b 8] [-e 256M] [-f 2] [-n 20] [-w 5]
//       [--backend mpi|nccl] [--memory shared|plain]
//       [--collective allreduce|allgather|reducescatter] [--checks] [--one-level]
//       [--back-to-back K] [--csv FILE]
//
// Per size: out-of-place and in-place Communicator::allreduce (issue, then
// Work::wait), and the raw call (MPI_Allreduce in place on MPI_COMM_WORLD,
// or ncclAllReduce in place on a communicator of its own, then a stream
// synchronize). Each iteration refills the buffers, starts after a barrier,
// and checks every element of the result against its closed form, so a wrong
// result is counted (#wrong, elements), never hidden; the program exits 1 if
// any was wrong. Each case runs its iterations back to back rather than
// taking turns with the others (as ddp_bench's caps do): the shared-memory
// path and MPI's own path leave different data in the caches (MPI's
// fragments, the peer's lines), so interleaving them measured each path
// out of its steady state (tried, and reverted). Times are the median over
// iterations of the slowest rank's time; algbw = bytes / time, busbw =
// algbw x 2(n-1)/n (nccl-tests' convention). ours/raw is in-place over raw.
//
// NCCL all-reduce: a fourth case, "stream-ordered": our in-place call
// consumed the way training consumes it, Work::synchronize (the compute
// stream waits for the collective) and then a cudaStreamSynchronize of the
// compute stream, the same host wait as the raw call's. Against the in-place
// columns (Work::wait: the host watches the collective, Note [Host wait on a
// device collective]) it separates what the host wait costs from what
// issuing through our layer costs; "ordered/raw" is over raw.
//
// --back-to-back K (all-reduce): two more cases timed as nccl-tests times,
// K calls issued back to back and one wait at the end, time per call: our
// out-of-place all-reduce (K Works, waited for from the last, so the host
// wakes once) and the raw one (K blocking MPI_Allreduce calls; K
// ncclAllReduce calls on the compute stream, then one stream synchronize).
// A training step issues its
// buckets so, one after another with no host wait between, and the
// columns above (one call, then its wait) count every call's hand-off in
// full. Out of place, so the buffer being sent stays what was filled and
// the result keeps its closed form; the last call's result is checked
// (poisoned before each batch). "b2b ours/raw" is the first over the second.
//
// --thread-floor (MPI, plain memory): a fourth case, the raw MPI_Allreduce
// handed to a bare worker thread (a mutex, a condition variable, nothing
// else) and waited for. It is the cost of running MPI on another thread at
// all, which any design with a communication thread pays (Note [MPI
// communication thread]); "ours/thread" is then what our layer adds on top.
//
// --checks (MPI): our communicator checks every result for NaN and
// infinity, as ddp_train asks of it (CommOptions::checkNonFinite; Note
// [Non-finite check while reducing] in comm/finite.h), so the table shows
// what training's collectives cost; without it, the collective alone.
//
// --one-level (MPI, across nodes): our communicator does not all-reduce in
// two levels (Note [Two-level all-reduce across nodes]): memory from
// Communicator::allocate() is then plain, as ddp_train's
// --two-level-allreduce off makes it. The header's first line says which
// path ran.
//
// --memory (MPI): `shared` puts the buffers in memory from
// Communicator::allocate(), which the Reducer uses: the node shared-memory
// all-reduce (Note [Node shared-memory all-reduce]) or, across nodes, the
// two-level one, different algorithms from the raw call. `plain` uses ordinary memory, so ours and
// raw run the same MPI_Allreduce and the ratio is the cost of the layer alone (the communication
// thread's hand-off and the Work).
//
// --collective allgather: Communicator::allgather, what --shard-optimizer
// does every step, against MPI_Allgather or ncclAllGather. As in nccl-tests'
// all_gather_perf, size is the whole gathered buffer (each rank sends
// size/N), busbw = algbw x (N-1)/N, and in place means each rank's part
// already sits at its offset. Before each call the other ranks' parts are
// poisoned, so a part that does not arrive is counted wrong. In shared
// memory (Note [Node shared-memory all-gather]) each rank copies the others'
// parts straight out of their segments.
//
// --collective reducescatter: Communicator::reduceScatter, what the Reducer
// does for --shard-optimizer (Note [Reduce-scatter for a sharded optimizer]),
// in equal parts, against MPI_Reduce_scatter (the call the plain path makes)
// or ncclReduceScatter, in place. (Open MPI 4.1's MPI_Reduce_scatter_block,
// the equal-parts form, took 0.7 ms at 256 KiB and 342 ms at 64 MiB on the
// development VM, np=2, where MPI_Reduce_scatter took 36 us and 3.8 ms up
// to 16 MiB.) As in nccl-tests' reduce_scatter_perf, size is the whole
// buffer each rank reduces and busbw = algbw x (N-1)/N. Our call is in place
// only, so the first group of columns is not an out-of-place call but our
// all-reduce of the same buffer, in place, measured in the same run: the
// two-to-one ratio a ring promises is then read off one row. Only each
// rank's own part is checked (the rest is unspecified), after the whole
// buffer is refilled.
#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/mpi_bench.h"
#include "comm/mpi/mpi_communicator.h"
#include "ddp_config.h"
#include "runtime/signals.h"
#include "runtime/str.h"
#include "runtime/world.h"
#if DDP_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/nccl/nccl_communicator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/device.h"
#endif

namespace {

using ddp::comm::DataType;
using ddp::comm::ReduceOp;

enum class Collective { kAllreduce, kAllgather, kReduceScatter };

// Rank r contributes r + (i % 7) at element i of what it sends: the sum
// has a closed form, and so has each gathered part.
void fillHost(float* data, std::size_t count, int rank) {
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<float>(rank + static_cast<int>(i % 7));
}

// Wrong elements of a result of `count` elements (all-gather: per rank; a
// reduce-scatter: rank `rank`'s part of count / n, at `part`).
int countWrong(Collective collective, const float* data, std::size_t count, int n, int rank = 0,
               const float* part = nullptr) {
  int wrong = 0;
  if (collective == Collective::kReduceScatter) {
    const std::size_t each = count / static_cast<std::size_t>(n);
    const std::size_t first = static_cast<std::size_t>(rank) * each;
    if (part == nullptr) part = data + first;
    for (std::size_t i = first; i < first + each; ++i)
      wrong += part[i - first] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7));
    return wrong;
  }
  if (collective == Collective::kAllgather) {
    for (int q = 0; q < n; ++q) {
      const float* part = data + static_cast<std::size_t>(q) * count;
      for (std::size_t i = 0; i < count; ++i)
        wrong += part[i] != static_cast<float>(q + static_cast<int>(i % 7));
    }
    return wrong;
  }
  for (std::size_t i = 0; i < count; ++i)
    wrong += data[i] != static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 7));
  return wrong;
}

// The raw call on a bare worker thread: hand-off there and back, nothing else.
class ThreadFloor {
 public:
  ThreadFloor() : thread_([this] { loop(); }) {}
  ~ThreadFloor() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  // Notifications go out after the mutex is released, so the woken thread
  // does not block again on it.
  void run(std::function<void()> job) {
    long mine = 0;
    {
      std::lock_guard lock(mutex_);
      job_ = std::move(job);
      mine = ++issued_;
    }
    wake_.notify_one();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return finished_ == mine; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || issued_ > finished_; });
        if (stopping_) return;
        job = std::move(job_);
      }
      job();
      {
        std::lock_guard lock(mutex_);
        ++finished_;
      }
      done_.notify_one();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()> job_;
  long issued_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

// `count` elements in `ranks` equal parts (count divides by ranks).
std::vector<std::size_t> equalParts(std::size_t count, int ranks) {
  std::vector<std::size_t> bounds;
  for (int q = 0; q <= ranks; ++q)
    bounds.push_back(count / static_cast<std::size_t>(ranks) * static_cast<std::size_t>(q));
  return bounds;
}

// One backend's buffers and calls. `count`: the all-reduce's elements, or
// what each rank contributes to the all-gather.
class Bench {
 public:
  explicit Bench(Collective collective) : collective_(collective) {}
  virtual ~Bench() = default;
  virtual float* send() = 0;
  virtual float* recv() = 0;
  // `count` elements between host memory and a buffer of send() or recv().
  virtual void upload(float* buffer, const float* host, std::size_t count) = 0;
  virtual void download(float* host, const float* buffer, std::size_t count) = 0;
  // The backend's communicator, which ours() and oursReduceScatter() call.
  virtual ddp::comm::Communicator& comm() = 0;
  void ours(const float* send, float* recv, std::size_t count) {
    const ddp::comm::WorkPtr work =
        collective() == Collective::kAllgather
            ? comm().allgather(send, recv, count, DataType::kFloat32)
            : comm().allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum);
    work->wait(std::chrono::minutes(5));
  }
  // In place, `count` elements in equal parts (Collective::kReduceScatter).
  void oursReduceScatter(float* data, std::size_t count, int ranks) {
    comm()
        .reduceScatter(data, equalParts(count, ranks), DataType::kFloat32, ReduceOp::kSum)
        ->wait(std::chrono::minutes(5));
  }
  // `calls` out-of-place all-reduces issued back to back, then waited for
  // from the last (--back-to-back): a backend runs its collectives in issue
  // order, so the earlier waits return at once, and the waiting thread
  // wakes once, as a stream synchronize would.
  void oursBackToBack(const float* send, float* recv, std::size_t count, int calls) {
    std::vector<ddp::comm::WorkPtr> works;
    works.reserve(static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i)
      works.push_back(comm().allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum));
    for (auto work = works.rbegin(); work != works.rend(); ++work)
      (*work)->wait(std::chrono::minutes(5));
  }
  virtual void raw(float* data, std::size_t count) = 0;
  // The raw out-of-place all-reduce `calls` times back to back, one wait at
  // the end (--back-to-back).
  virtual void rawBackToBack(const float* send, float* recv, std::size_t count, int calls) = 0;
  // Our in-place all-reduce, stream-ordered (NCCL only; see the header).
  virtual void oursOrdered(float*, std::size_t) {}
  // The raw call on a bare worker thread (--thread-floor, which main() allows
  // for the MPI backend only).
  virtual void rawOnThread(float*, std::size_t) {}
  virtual std::string describe() const = 0;
  Collective collective() const { return collective_; }

 private:
  Collective collective_;
};

class MpiBench final : public Bench {
 public:
  MpiBench(const ddp::World& world, Collective collective, std::size_t bytes, bool shared,
           bool checks, bool oneLevel)
      : Bench(collective), comm_(world.comm(), optionsFor(checks, oneLevel)), shared_(shared) {
    if (shared) {
      sharedSend_ = comm_.allocate(bytes);
      sharedRecv_ = comm_.allocate(bytes);
    } else {
      plainSend_.resize(bytes / 4 + 1);
      plainRecv_.resize(bytes / 4 + 1);
    }
  }
  float* send() override {
    return shared_ ? static_cast<float*>(sharedSend_.get()) : plainSend_.data();
  }
  float* recv() override {
    return shared_ ? static_cast<float*>(sharedRecv_.get()) : plainRecv_.data();
  }
  void upload(float* buffer, const float* host, std::size_t count) override {
    std::memcpy(buffer, host, count * sizeof(float));
  }
  void download(float* host, const float* buffer, std::size_t count) override {
    std::memcpy(host, buffer, count * sizeof(float));
  }
  ddp::comm::Communicator& comm() override { return comm_; }
  // A reduce-scatter's raw call leaves this rank's part at the start (MPI_IN_PLACE).
  void raw(float* data, std::size_t count) override {
    if (collective() == Collective::kAllgather) {
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(count), MPI_FLOAT,
                    MPI_COMM_WORLD);
      return;
    }
    if (collective() == Collective::kReduceScatter) {
      int ranks = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &ranks);
      const std::vector<int> counts(static_cast<std::size_t>(ranks),
                                    static_cast<int>(count) / ranks);
      MPI_Reduce_scatter(MPI_IN_PLACE, data, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return;
    }
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  void rawBackToBack(const float* send, float* recv, std::size_t count, int calls) override {
    for (int i = 0; i < calls; ++i)
      MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  void rawOnThread(float* data, std::size_t count) override {
    if (!floor_) {
      MPI_Comm_dup(MPI_COMM_WORLD, &floorComm_);  // its own, as the communicator has
      floor_ = std::make_unique<ThreadFloor>();
    }
    floor_->run([&] {
      MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, floorComm_);
    });
  }
  static ddp::comm::CommOptions optionsFor(bool checks, bool oneLevel) {
    ddp::comm::CommOptions options;
    options.checkNonFinite = checks;
    options.twoLevelAcrossNodes = !oneLevel;
    return options;
  }
  ~MpiBench() override {
    floor_.reset();  // its thread is idle between calls; stopped before its communicator goes
    if (floorComm_ != MPI_COMM_NULL) MPI_Comm_free(&floorComm_);
  }
  std::string describe() const override {
    const char* call = collective() == Collective::kAllgather       ? "MPI_Allgather"
                       : collective() == Collective::kReduceScatter ? "MPI_Reduce_scatter"
                                                                    : "MPI_Allreduce";
    return shared_ ? comm_.describe() + ", memory from Communicator::allocate (raw: " + call + ")"
                   : std::string("mpi, plain memory (ours and raw both ") + call + ")";
  }

 private:
  ddp::comm::MpiCommunicator comm_;
  std::unique_ptr<ThreadFloor> floor_;
  MPI_Comm floorComm_ = MPI_COMM_NULL;
  bool shared_;
  std::shared_ptr<void> sharedSend_, sharedRecv_;
  std::vector<float> plainSend_, plainRecv_;
};

#if DDP_WITH_CUDA
void cudaCheck(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "allreduce_bench: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// This rank's GPU (as ddp_train picks it), made current.
int useDevice(const ddp::World& world) {
  const int device = ddp::cuda::deviceForLocalRank(world.localRank(), world.localSize(),
                                                   ddp::cuda::visibleDeviceCount());
  ddp::cuda::setDevice(device);
  return device;
}

class NcclBench final : public Bench {
 public:
  NcclBench(const ddp::World& world, Collective collective, std::size_t bytes)
      : Bench(collective),
        rank_(world.rank()),
        device_(useDevice(world)),
        comm_(world.comm(), device_, ddp::cuda::computeStream(), {}) {
    send_ = comm_.allocate(bytes);
    recv_ = comm_.allocate(bytes);
    ncclUniqueId id;
    if (world.rank() == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&raw_, world.size(), id, world.rank()) != ncclSuccess) {
      std::fprintf(stderr, "allreduce_bench: ncclCommInitRank failed\n");
      std::exit(1);
    }
  }
  ~NcclBench() override { ncclCommDestroy(raw_); }
  float* send() override { return static_cast<float*>(send_.get()); }
  float* recv() override { return static_cast<float*>(recv_.get()); }
  void upload(float* buffer, const float* host, std::size_t count) override {
    cudaCheck(cudaMemcpy(buffer, host, count * 4, cudaMemcpyHostToDevice), "upload");
  }
  void download(float* host, const float* buffer, std::size_t count) override {
    cudaCheck(cudaMemcpy(host, buffer, count * 4, cudaMemcpyDeviceToHost), "download");
  }
  ddp::comm::Communicator& comm() override { return comm_; }
  // In place: this rank's part of the buffer receives its reduction.
  void raw(float* data, std::size_t count) override {
    const cudaStream_t stream = ddp::cuda::computeStream();
    if (collective() == Collective::kAllgather) {
      ncclAllGather(data + static_cast<std::size_t>(rank_) * count, data, count, ncclFloat32, raw_,
                    stream);
    } else if (collective() == Collective::kReduceScatter) {
      int ranks = 1;
      ncclCommCount(raw_, &ranks);
      const std::size_t each = count / static_cast<std::size_t>(ranks);
      ncclReduceScatter(data, data + static_cast<std::size_t>(rank_) * each, each, ncclFloat32,
                        ncclSum, raw_, stream);
    } else {
      ncclAllReduce(data, data, count, ncclFloat32, ncclSum, raw_, stream);
    }
    cudaCheck(cudaStreamSynchronize(stream), "raw");
  }
  void rawBackToBack(const float* send, float* recv, std::size_t count, int calls) override {
    const cudaStream_t stream = ddp::cuda::computeStream();
    for (int i = 0; i < calls; ++i)
      ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, raw_, stream);
    cudaCheck(cudaStreamSynchronize(stream), "raw back-to-back");
  }
  void oursOrdered(float* data, std::size_t count) override {
    comm_.allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum)
        ->synchronize(std::chrono::minutes(5));
    cudaCheck(cudaStreamSynchronize(ddp::cuda::computeStream()), "stream-ordered");
  }
  std::string describe() const override {
    return "nccl " + ddp::comm::NcclCommunicator::version() + " (raw: " +
           (collective() == Collective::kAllgather       ? "ncclAllGather"
            : collective() == Collective::kReduceScatter ? "ncclReduceScatter"
                                                         : "ncclAllReduce") +
           ")";
  }

 private:
  int rank_;
  int device_;
  ddp::comm::NcclCommunicator comm_;
  std::shared_ptr<void> send_, recv_;
  ncclComm_t raw_ = nullptr;
};
#endif

constexpr const char* kUsage =
    "usage: allreduce_bench [-b bytes] [-e bytes] [-f factor] [-n iters] [-w warmup] "
    "[--backend mpi|nccl] [--memory shared|plain] "
    "[--collective allreduce|allgather|reducescatter] [--thread-floor] [--checks] "
    "[--one-level] [--back-to-back K] [--csv FILE]\n";

// --help: what a user of nccl-tests' all_reduce_perf looks for, each
// option with its default, and what the columns mean.
constexpr const char* kAbout =
    "Times a float32 collective through ddp's Communicator over a range of sizes, out of\n"
    "place and in place, beside the library's own call (MPI_Allreduce, ncclAllReduce) in\n"
    "the same run, and checks every element of every result. Run it under mpirun, one\n"
    "rank per CPU slot or per GPU: mpirun -np 2 allreduce_bench -b 1K -e 64M -f 4\n"
    "\n"
    "Options [default]:\n"
    "  -b SIZE             the smallest size, in bytes (8, 64K, 4M, 1G) [8]\n"
    "  -e SIZE             the largest size [256M]\n"
    "  -f FACTOR           each size is the last one times FACTOR [2]\n"
    "  -n N                timed iterations per size and case [20]\n"
    "  -w N                untimed warm-up iterations per size and case [5]\n"
    "  --backend NAME      mpi | nccl (one GPU per rank) [mpi]\n"
    "  --memory KIND       mpi: shared (buffers from Communicator::allocate, as the\n"
    "                      Reducer's: the node shared-memory all-reduce) | plain\n"
    "                      (ordinary memory: ours and raw make the same MPI call, so\n"
    "                      ours/raw is what the layer costs) [shared]\n"
    "  --collective NAME   allreduce | allgather (what --shard-optimizer gathers; size:\n"
    "                      the gathered buffer) | reducescatter (what it reduces; size:\n"
    "                      the whole buffer, the first columns our all-reduce of it)\n"
    "                      [allreduce]\n"
    "  --back-to-back K    also time K calls issued one after another and one wait,\n"
    "                      ours and raw, as nccl-tests and a training step's buckets do\n"
    "  --thread-floor      also time the raw call handed to a bare thread: what any\n"
    "                      communication thread costs (mpi, plain, allreduce)\n"
    "  --checks            ours checks every result for NaN and infinity, as it does in\n"
    "                      training (mpi)\n"
    "  --one-level         across nodes, no two-level all-reduce, as ddp_train\n"
    "                      --two-level-allreduce off (mpi)\n"
    "  --csv FILE          also write every row to FILE\n"
    "  -h, --help          print this help and exit\n"
    "\n"
    "Columns: time(us) is the median over the iterations of the slowest rank's time;\n"
    "algbw = size / time (GB/s); busbw = algbw x 2(n-1)/n for an all-reduce and\n"
    "x (n-1)/n for an all-gather or reduce-scatter, as nccl-tests reports them; #wrong\n"
    "counts the wrong elements of the results (any makes the exit code 1); ours/raw is\n"
    "our in-place time over the raw call's. The last lines: the average busbw over the\n"
    "sizes (as nccl-tests ends its table), ours/raw from 1 MiB up (median and largest),\n"
    "and the wrong results. Nonzero exit: 2 for a bad command line, 77 for --backend\n"
    "nccl without a GPU.\n";

constexpr ddp::bench::ToolText kText{"allreduce_bench", kUsage, kAbout};

// The command line (the flags in the comment at the top).
struct Options : ddp::bench::Sweep {
  Options() { begin = 8, end = 256 << 20, factor = 2, iterations = 20, warmup = 5; }
  std::string backend = "mpi", memory = "shared", csvPath;
  Collective collective = Collective::kAllreduce;
  bool threadFloor = false;
  bool checks = false;
  bool oneLevel = false;
  int backToBack = 0;  // calls per batch; 0: not measured
};

// The command line; throws BadCommandLine, naming what is wrong with it.
Options parse(int argc, char** argv) {
  using ddp::bench::BadCommandLine;
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--thread-floor" || flag == "--checks" || flag == "--one-level") {
      (flag == "--checks" ? o.checks : flag == "--one-level" ? o.oneLevel : o.threadFloor) = true;
      --i;  // takes no value
      continue;
    }
    if (i + 1 >= argc) throw BadCommandLine(flag + " needs a value");
    const char* value = argv[i + 1];
    if (o.take(flag, value)) continue;
    const std::string name = value;
    if (flag == "--backend") {
      if (name != "mpi" && name != "nccl")
        throw BadCommandLine("--backend " + name + ": mpi or nccl");
      o.backend = name;
    } else if (flag == "--memory") {
      if (name != "shared" && name != "plain") {
        throw BadCommandLine("--memory " + name + ": shared or plain");
      }
      o.memory = name;
    } else if (flag == "--collective") {
      if (name == "allreduce") {
        o.collective = Collective::kAllreduce;
      } else if (name == "allgather") {
        o.collective = Collective::kAllgather;
      } else if (name == "reducescatter") {
        o.collective = Collective::kReduceScatter;
      } else {
        throw BadCommandLine("--collective " + name + ": allreduce, allgather or reducescatter");
      }
    } else if (flag == "--csv") {
      o.csvPath = value;
    } else if (flag == "--back-to-back") {
      const std::optional<int> calls = ddp::bench::parseCount(value, 1);
      if (!calls)
        throw BadCommandLine("--back-to-back " + name + ": not a whole number of at least 1");
      o.backToBack = *calls;
    } else {
      throw BadCommandLine("unknown flag '" + flag + "'");
    }
  }
  o.check();
  const bool allreduce = o.collective == Collective::kAllreduce;
  if (o.threadFloor && (o.backend != "mpi" || o.memory != "plain" || !allreduce)) {
    throw BadCommandLine(
        "--thread-floor times MPI_Allreduce on a bare thread: it needs --backend mpi, --memory "
        "plain and --collective allreduce");
  }
  if ((o.checks || o.oneLevel) && o.backend != "mpi") {
    throw BadCommandLine(std::string(o.checks ? "--checks" : "--one-level") +
                         " needs --backend mpi");
  }
  if (o.backToBack > 0 && !allreduce)
    throw BadCommandLine("--back-to-back needs --collective allreduce");
  return o;
}

// Whether the stream-ordered case runs (see the header): NCCL all-reduces.
bool streamOrdered(const Options& o) {
  return o.backend == "nccl" && o.collective == Collective::kAllreduce;
}

// The table's header on stdout, and the CSV's (null when there is no --csv).
std::FILE* printHeader(const Options& o, const ddp::World& world, const Bench& bench) {
  std::printf("# allreduce_bench: %d ranks on %d node(s), %s\n", world.size(), world.nodeCount(),
              bench.describe().c_str());
  if (world.nodeCount() > 1) std::printf("# nodes: %s\n", describeNodes(world.nodes()).c_str());
  const bool scatter = o.collective == Collective::kReduceScatter;
  std::printf("# float32 %s, median of %d iterations (after %d warm-up) of the slowest rank%s\n",
              o.collective == Collective::kAllgather ? "all-gather (size: the gathered buffer)"
              : scatter ? "sum reduce-scatter in equal parts (size: the whole buffer; first "
                          "columns: our in-place all-reduce of it)"
                        : "sum all-reduce",
              o.iterations, o.warmup,
              o.checks ? "; ours checks every result for NaN and infinity (--checks)" : "");
  std::printf("#%11s %12s %6s %6s   %10s %8s %8s %6s   %10s %8s %8s %6s   %10s %8s %7s%s%s\n", "",
              "", "", "", scatter ? "all-reduce" : "out-of-place", "", "", "",
              scatter ? "reduce-scat" : "in-place", "", "", "", "raw", "", "",
              streamOrdered(o) ? "   stream-ordered     "
              : o.threadFloor  ? "   raw on a bare thread"
                               : "",
              o.backToBack > 0
                  ? ddp::str("   back to back, ", o.backToBack, " calls a wait (us a call)").c_str()
                  : "");
  std::printf("#%11s %12s %6s %6s   %10s %8s %8s %6s   %10s %8s %8s %6s   %10s %8s %7s%s%s\n",
              "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong", "time(us)",
              "algbw", "busbw", "#wrong", "time(us)", "busbw", "ours/raw",
              streamOrdered(o) ? "     time(us) ordered/raw"
              : o.threadFloor  ? "     time(us) ours/thread"
                               : "",
              o.backToBack > 0 ? "         ours          raw #wrong b2b ours/raw" : "");
  if (o.csvPath.empty()) return nullptr;
  std::FILE* csv = std::fopen(o.csvPath.c_str(), "w");
  if (csv == nullptr) {
    std::fprintf(stderr, "allreduce_bench: cannot write %s\n", o.csvPath.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fprintf(csv,
               "backend,memory,ranks,bytes,count,oop_us,oop_algbw,oop_busbw,oop_wrong,ip_us,"
               "ip_algbw,ip_busbw,ip_wrong,raw_us,raw_busbw,raw_wrong%s%s,collective\n",
               streamOrdered(o) ? ",ordered_us,ordered_wrong"
               : o.threadFloor  ? ",thread_us,thread_wrong"
                                : "",
               o.backToBack > 0 ? ",b2b_calls,b2b_us,b2b_raw_us,b2b_wrong" : "");
  return csv;
}

// One size's measurements.
struct Row {
  std::size_t bytes = 0;
  ddp::bench::Measured outOfPlace, inPlace, raw, onThread, ordered;
  // --back-to-back: a call's time in a batch; wrong elements of each batch's last result.
  ddp::bench::Measured backToBack, backToBackRaw;
};

// busbw over algbw, nccl-tests' factor: what each rank's links carry, over
// the size. `collective` is the in-place and raw columns' collective.
double busOverAlg(Collective collective, int ranks) {
  const double ringSteps = (ranks - 1) / static_cast<double>(ranks);
  return ranks == 1 ? 1.0 : (collective == Collective::kAllreduce ? 2.0 : 1.0) * ringSteps;
}

// The row on stdout and, with --csv, in `csv`.
void printRow(const Options& o, int ranks, const Row& r, std::FILE* csv) {
  const bool gather = o.collective == Collective::kAllgather;
  const bool scatter = o.collective == Collective::kReduceScatter;
  const double ringSteps = (ranks - 1) / static_cast<double>(ranks);
  const double busFactor = busOverAlg(o.collective, ranks);
  // The first columns of a reduce-scatter row are an all-reduce's.
  const double firstFactor = scatter && ranks > 1 ? 2.0 * ringSteps : busFactor;
  const std::size_t count = r.bytes / sizeof(float);
  const auto algbw = [&](double us) { return static_cast<double>(r.bytes) / us / 1e3; };  // GB/s
  const ddp::bench::Measured &oop = r.outOfPlace, &ip = r.inPlace, &raw = r.raw;
  std::printf(
      "%12zu %12zu %6s %6s   %10.1f %8.2f %8.2f %6ld   %10.1f %8.2f %8.2f %6ld   %10.1f "
      "%8.2f %7.2f",
      r.bytes, count, "float", gather ? "none" : "sum", oop.micros, algbw(oop.micros),
      algbw(oop.micros) * firstFactor, oop.wrong, ip.micros, algbw(ip.micros),
      algbw(ip.micros) * busFactor, ip.wrong, raw.micros, algbw(raw.micros) * busFactor,
      ip.micros / raw.micros);
  if (streamOrdered(o))
    std::printf("   %10.1f %11.2f", r.ordered.micros, r.ordered.micros / raw.micros);
  if (o.threadFloor)
    std::printf("   %10.1f %11.2f", r.onThread.micros, ip.micros / r.onThread.micros);
  if (o.backToBack > 0)
    std::printf("   %10.1f %12.1f %6ld %12.2f", r.backToBack.micros, r.backToBackRaw.micros,
                r.backToBack.wrong + r.backToBackRaw.wrong,
                r.backToBack.micros / r.backToBackRaw.micros);
  std::printf("\n");
  std::fflush(stdout);
  if (csv == nullptr) return;
  std::fprintf(csv, "%s,%s,%d,%zu,%zu,%.3f,%.4f,%.4f,%ld,%.3f,%.4f,%.4f,%ld,%.3f,%.4f,%ld",
               o.backend.c_str(), o.backend == "mpi" ? o.memory.c_str() : "device", ranks, r.bytes,
               count, oop.micros, algbw(oop.micros), algbw(oop.micros) * firstFactor, oop.wrong,
               ip.micros, algbw(ip.micros), algbw(ip.micros) * busFactor, ip.wrong, raw.micros,
               algbw(raw.micros) * busFactor, raw.wrong);
  if (streamOrdered(o)) std::fprintf(csv, ",%.3f,%ld", r.ordered.micros, r.ordered.wrong);
  if (o.threadFloor) std::fprintf(csv, ",%.3f,%ld", r.onThread.micros, r.onThread.wrong);
  if (o.backToBack > 0)
    std::fprintf(csv, ",%d,%.3f,%.3f,%ld", o.backToBack, r.backToBack.micros,
                 r.backToBackRaw.micros, r.backToBack.wrong + r.backToBackRaw.wrong);
  std::fprintf(csv, ",%s\n", gather ? "allgather" : scatter ? "reducescatter" : "allreduce");
}

// The lines after the table: the average bus bandwidth over the sizes, as
// nccl-tests ends its table, and ours/raw from 1 MiB up, the range the
// target of "within 5% of the raw call" is set for.
void printSummary(const Options& o, int ranks, const std::vector<Row>& rows) {
  if (rows.empty()) return;
  const double factor = busOverAlg(o.collective, ranks);
  double ours = 0, raw = 0;
  std::vector<double> ratios, backToBack;
  for (const Row& r : rows) {
    ours += static_cast<double>(r.bytes) / r.inPlace.micros / 1e3 * factor;
    raw += static_cast<double>(r.bytes) / r.raw.micros / 1e3 * factor;
    if (r.bytes < (std::size_t{1} << 20)) continue;
    ratios.push_back(r.inPlace.micros / r.raw.micros);
    if (o.backToBack > 0) backToBack.push_back(r.backToBack.micros / r.backToBackRaw.micros);
  }
  const auto count = static_cast<double>(rows.size());
  std::printf("# avg bus bandwidth over %zu sizes (GB/s): ours in place %.2f, raw %.2f\n",
              rows.size(), ours / count, raw / count);
  if (ratios.empty()) return;
  const auto medianAndLargest = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t half = values.size() / 2;
    const double median =
        values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
    return ddp::str("median ", ddp::fixed(median, 2), ", largest ", ddp::fixed(values.back(), 2));
  };
  std::printf(
      "# ours/raw in place from 1 MiB up (%zu sizes): %s%s\n", ratios.size(),
      medianAndLargest(ratios).c_str(),
      backToBack.empty() ? "" : ddp::str("; back to back: ", medianAndLargest(backToBack)).c_str());
}

// The sweep the command line asks for, on every rank.
int run(const Options& o) {
  ddp::installBrokenPipeHandler();  // Note [Broken pipes] in runtime/signals.h
  ddp::World world;
  const int n = world.size(), rank = world.rank();
  std::unique_ptr<Bench> bench;
  if (o.backend == "nccl") {
#if DDP_WITH_CUDA
    if (ddp::cuda::visibleDeviceCount() == 0) {
      if (rank == 0) std::fprintf(stderr, "allreduce_bench: --backend nccl needs a GPU\n");
      return 77;
    }
    bench = std::make_unique<NcclBench>(world, o.collective, o.end);
#else
    if (rank == 0) std::fprintf(stderr, "allreduce_bench: built without CUDA: no --backend nccl\n");
    return 2;
#endif
  } else {
    bench = std::make_unique<MpiBench>(world, o.collective, o.end, o.memory == "shared", o.checks,
                                       o.oneLevel);
  }
  std::FILE* csv = rank == 0 ? printHeader(o, world, *bench) : nullptr;
  long anyWrong = 0;
  const bool gather = o.collective == Collective::kAllgather;
  const bool scatter = o.collective == Collective::kReduceScatter;
  const auto ranks = static_cast<std::size_t>(n);
  std::vector<Row> rows;
  for (std::size_t bytes = o.begin; bytes <= o.end; bytes *= o.factor) {
    // What each call passes (an all-gather: each rank's part; a
    // reduce-scatter: the whole buffer, in equal parts), and the result.
    std::size_t count = bytes / sizeof(float) / (gather ? ranks : 1);
    if (scatter) count -= count % ranks;
    if (count == 0) continue;  // smaller than one float per rank
    const std::size_t elements = gather ? count * ranks : count;
    float* send = bench->send();
    float* recv = bench->recv();
    float* mineInRecv = gather ? recv + static_cast<std::size_t>(rank) * count : recv;
    std::vector<float> mine(count), poison(elements, -1.0f), result(elements);
    fillHost(mine.data(), count, rank);
    // Every part that is not this rank's own is poisoned before each call.
    const auto outOfPlace = [&] {
      bench->upload(send, mine.data(), count);
      bench->upload(recv, poison.data(), elements);
    };
    const auto inPlace = [&] {
      bench->upload(recv, poison.data(), elements);
      bench->upload(mineInRecv, mine.data(), count);
    };
    const auto checkRecv = [&] {
      bench->download(result.data(), recv, elements);
      return countWrong(o.collective, result.data(), count, n, rank);
    };
    Row row;
    row.bytes = elements * sizeof(float);
    // A reduce-scatter's first columns are our in-place all-reduce of the
    // buffer; its raw call on MPI leaves the part at the buffer's start
    // (MPI_IN_PLACE), on NCCL where it belongs.
    const auto checkWhole = [&] {
      bench->download(result.data(), recv, elements);
      return countWrong(Collective::kAllreduce, result.data(), count, n);
    };
    const auto checkRaw = [&] {
      bench->download(result.data(), recv, elements);
      return countWrong(o.collective, result.data(), count, n, rank,
                        scatter && o.backend == "mpi" ? result.data() : nullptr);
    };
    row.outOfPlace = scatter ? ddp::bench::measure(
                                   o.iterations, o.warmup, inPlace,
                                   [&] { bench->ours(recv, recv, count); }, checkWhole)
                             : ddp::bench::measure(
                                   o.iterations, o.warmup, outOfPlace,
                                   [&] { bench->ours(send, recv, count); }, checkRecv);
    row.inPlace = ddp::bench::measure(
        o.iterations, o.warmup, inPlace,
        [&] {
          if (scatter) {
            bench->oursReduceScatter(recv, count, n);
          } else {
            bench->ours(mineInRecv, recv, count);
          }
        },
        checkRecv);
    row.raw = ddp::bench::measure(
        o.iterations, o.warmup, inPlace, [&] { bench->raw(recv, count); }, checkRaw);
    if (streamOrdered(o)) {
      row.ordered = ddp::bench::measure(
          o.iterations, o.warmup, inPlace, [&] { bench->oursOrdered(recv, count); }, checkRecv);
    }
    if (o.threadFloor) {
      row.onThread = ddp::bench::measure(
          o.iterations, o.warmup, inPlace, [&] { bench->rawOnThread(recv, count); }, checkRecv);
    }
    if (o.backToBack > 0) {
      const auto perCall = [&](ddp::bench::Measured batch) {
        batch.micros /= o.backToBack;
        return batch;
      };
      row.backToBack = perCall(ddp::bench::measure(
          o.iterations, o.warmup, outOfPlace,
          [&] { bench->oursBackToBack(send, recv, count, o.backToBack); }, checkRecv));
      row.backToBackRaw = perCall(ddp::bench::measure(
          o.iterations, o.warmup, outOfPlace,
          [&] { bench->rawBackToBack(send, recv, count, o.backToBack); }, checkRecv));
    }
    anyWrong += row.outOfPlace.wrong + row.inPlace.wrong + row.raw.wrong + row.onThread.wrong +
                row.ordered.wrong + row.backToBack.wrong + row.backToBackRaw.wrong;
    if (rank == 0) printRow(o, n, row, csv);
    rows.push_back(row);
  }
  if (csv != nullptr) std::fclose(csv);
  if (rank == 0) printSummary(o, n, rows);
  if (rank == 0) std::printf("# wrong results: %ld\n", anyWrong);
  return anyWrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(
      kText, argc, argv, [&](const std::vector<std::string>&) { return run(parse(argc, argv)); });
}
