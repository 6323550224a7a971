// The NCCL backend under mpirun (np = number of GPUs; the GPU check runs np=1):
// collectives on device memory with closed-form results, host buffers routed
// through MPI, the Reducer on NCCL against the Reducer on MPI, and the
// watchdog turning a collective that cannot complete into a report.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "comm/bfloat16.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/reducer.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/memory.h"
#include "runtime/error.h"

namespace ddp::comm {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<NcclCommunicator> makeNccl(std::chrono::milliseconds timeout = 60s) {
  CommOptions options;
  options.timeout = timeout;
  return std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, cuda::currentDevice(),
                                            cuda::computeStream(), options);
}

template <class T>
std::vector<T> toHost(const std::shared_ptr<void>& device, std::size_t count) {
  std::vector<T> host(count);
  cuda::copyToHost(host.data(), device.get(), count * sizeof(T));
  return host;
}

template <class T>
void toDevice(const std::shared_ptr<void>& device, const std::vector<T>& host) {
  cuda::copyToDevice(device.get(), host.data(), host.size() * sizeof(T));
}

TEST(Nccl, AllReduceSumAverageAndMaxOnDeviceMemory) {
  auto comm = makeNccl();
  const int n = comm->size(), r = comm->rank();
  for (std::size_t count : {1ul, 1000ul, 3ul << 20}) {
    auto buffer = comm->allocate(count * sizeof(float));
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i)
      values[i] = static_cast<float>(r) + static_cast<float>(i % 7);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      toDevice(buffer, values);
      comm->allreduce(buffer.get(), count, DataType::kFloat32, op)->wait(60s);
      const std::vector<float> out = toHost<float>(buffer, count);
      for (std::size_t i = 0; i < count; ++i) {
        const float base = static_cast<float>(i % 7);
        const float expected = op == ReduceOp::kSum   ? n * base + n * (n - 1) / 2.0f
                               : op == ReduceOp::kAvg ? base + (n - 1) / 2.0f
                                                      : base + static_cast<float>(n - 1);
        ASSERT_FLOAT_EQ(out[i], expected) << reduceOpName(op) << " element " << i;
      }
    }
  }
}

TEST(Nccl, BroadcastAndAllGatherOnDeviceMemory) {
  auto comm = makeNccl();
  const int n = comm->size(), r = comm->rank();
  auto buffer = comm->allocate(100 * sizeof(std::int32_t));
  toDevice(buffer, std::vector<std::int32_t>(100, r == 0 ? 42 : -1));
  comm->broadcast(buffer.get(), 100, DataType::kInt32, 0)->wait(60s);
  for (std::int32_t v : toHost<std::int32_t>(buffer, 100))
    ASSERT_EQ(v, 42);
  auto send = comm->allocate(3 * sizeof(float));
  auto receive = comm->allocate(3 * static_cast<std::size_t>(n) * sizeof(float));
  toDevice(send, std::vector<float>{float(r), float(r) + 0.5f, float(10 * r)});
  comm->allgather(send.get(), receive.get(), 3, DataType::kFloat32)->wait(60s);
  const std::vector<float> all = toHost<float>(receive, 3 * static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(all[3 * q], float(q));
    EXPECT_EQ(all[3 * q + 1], float(q) + 0.5f);
    EXPECT_EQ(all[3 * q + 2], float(10 * q));
  }
}

// One ncclReduce per non-empty part, rooted at its owner: each rank's part
// ends reduced where it lies, an empty part included.
TEST(Nccl, ReduceScatterInUnevenPartsOnDeviceMemory) {
  auto comm = makeNccl();
  const int n = comm->size(), r = comm->rank();
  const std::size_t count = 100003;
  std::vector<std::size_t> bounds;  // the first rank's part empty when n > 1
  for (int q = 0; q <= n; ++q)
    bounds.push_back(
        q == 0 ? 0 : count * static_cast<std::size_t>(q * q) / static_cast<std::size_t>(n * n));
  auto buffer = comm->allocate(count * sizeof(float));
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(r) + static_cast<float>(i % 7);
  toDevice(buffer, values);
  comm->reduceScatter(buffer.get(), bounds, DataType::kFloat32, ReduceOp::kAvg)->wait(60s);
  const std::vector<float> out = toHost<float>(buffer, count);
  const auto q = static_cast<std::size_t>(r);
  for (std::size_t i = bounds[q]; i < bounds[q + 1]; ++i)
    ASSERT_FLOAT_EQ(out[i], static_cast<float>(i % 7) + (n - 1) / 2.0f) << "element " << i;
}

TEST(Nccl, HostBuffersGoThroughMpi) {
  auto comm = makeNccl();
  const int n = comm->size(), r = comm->rank();
  double totals[2] = {1.0 * r, 2.0};
  comm->allreduceSync(std::span<double>(totals), ReduceOp::kSum);
  EXPECT_EQ(totals[0], n * (n - 1) / 2.0);
  EXPECT_EQ(totals[1], 2.0 * n);
}

TEST(Nccl, SynchronizeOrdersTheComputeStreamWithoutBlocking) {
  auto comm = makeNccl();
  const int n = comm->size();
  auto buffer = comm->allocate(1 << 20);
  toDevice(buffer, std::vector<float>(1 << 18, 1.0f));
  WorkPtr work = comm->allreduce(buffer.get(), 1 << 18, DataType::kFloat32, ReduceOp::kSum);
  work->synchronize(60s);  // the compute stream waits; the copy below runs after it
  const std::vector<float> out = toHost<float>(buffer, 1 << 18);
  for (float v : out)
    ASSERT_EQ(v, static_cast<float>(n));
  work->wait(60s);
  EXPECT_TRUE(work->isCompleted());
}

// The same gradients, reduced by the Reducer on NCCL (device buffers) and on
// MPI (host buffers), with several buckets: the same means, and with the
// bf16 hook the same bits in a world of one (each side rounds once, the
// same way, and widens), within bfloat16's rounding in larger ones (NCCL
// adds in bfloat16, MPI in float32).
TEST(Nccl, ReducerMatchesTheMpiReducer) {
  auto nccl = makeNccl();
  CommOptions options;
  options.timeout = 60s;
  MpiCommunicator mpi(MPI_COMM_WORLD, options);
  const int r = nccl->rank();
  const std::vector<GradientSpec> specs = {{"layers.0.weight", 300000},
                                           {"layers.0.bias", 1000},
                                           {"frozen", 64, false},
                                           {"layers.2.weight", 70000},
                                           {"layers.2.bias", 10}};
  const int n = nccl->size();
  for (const auto& [cap, compression] :
       {std::pair{std::size_t{0}, GradCompression::kNone},
        std::pair{std::size_t{256} << 10, GradCompression::kNone},
        std::pair{kSingleBucket, GradCompression::kNone},
        std::pair{std::size_t{256} << 10, GradCompression::kBf16}}) {
    SCOPED_TRACE(compression == GradCompression::kBf16 ? "bf16" : "float32");
    // Gradients below 1: one bfloat16 rounding is at most 2^-9 off, and NCCL
    // rounds once per addition.
    const float tolerance = compression == GradCompression::kNone ? 1e-6f
                            : n == 1                              ? 0.0f
                                     : static_cast<float>(n + 1) / 512.0f;
    Reducer onDevice(*nccl, specs, {cap, cap, false, compression, {}});
    Reducer onHost(mpi, specs, {cap, cap, false, compression, {}});
    ASSERT_EQ(onDevice.buckets().size(), onHost.buckets().size());
    for (int step = 0; step < 2; ++step) {
      onDevice.prepareForBackward(true);
      onHost.prepareForBackward(true);
      for (std::size_t g = specs.size(); g-- > 0;) {
        if (!specs[g].requiresGrad) continue;
        std::vector<float> values(specs[g].numel);
        for (std::size_t i = 0; i < values.size(); ++i)
          values[i] = 0.001f * static_cast<float>((i * 31 + g * 7 + r * 13 + step) % 1000);
        std::copy(values.begin(), values.end(), onHost.gradient(g).begin());
        cuda::copyToDevice(onDevice.gradient(g).data(), values.data(), values.size() * 4);
        onDevice.markReady(g);
        onHost.markReady(g);
      }
      onDevice.finalize();
      onHost.finalize();
      for (std::size_t g = 0; g < specs.size(); ++g) {
        if (!specs[g].requiresGrad) continue;
        std::vector<float> device(specs[g].numel);
        cuda::copyToHost(device.data(), onDevice.gradient(g).data(), device.size() * 4);
        const std::span<float> host = onHost.gradient(g);
        for (std::size_t i = 0; i < device.size(); ++i)
          ASSERT_NEAR(device[i], host[i], tolerance) << specs[g].name << " element " << i;
      }
    }
  }
}

// The bf16 hook's conversions on a GPU (comm/nccl/bfloat16_kernels.h) give
// the host's bits (comm/bfloat16.h) for every kind of float: ties both
// ways, the largest finite value (which rounds to infinity), infinities,
// subnormals, NaNs with payloads, and random bit patterns. The outputs are
// poisoned first with a value other than the expected one.
TEST(Nccl, BFloat16ConversionsGiveTheHostsBits) {
  auto comm = makeNccl();
  std::vector<std::uint32_t> bits = {
      0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x7f7fffffu,
      0x7f800000u, 0xff800000u, 0x00000001u, 0x00408000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu};
  std::mt19937 random(7);
  while (bits.size() < 100003)
    bits.push_back(static_cast<std::uint32_t>(random()));
  const std::size_t count = bits.size();
  std::vector<float> values(count);
  std::memcpy(values.data(), bits.data(), count * sizeof(float));
  std::vector<std::uint16_t> expected(count), poison(count);
  for (std::size_t i = 0; i < count; ++i) {
    expected[i] = toBFloat16(values[i]);
    poison[i] = static_cast<std::uint16_t>(expected[i] ^ 1u);
  }
  const auto in = comm->allocate(count * sizeof(float));
  const auto narrow = comm->allocate(count * sizeof(std::uint16_t));
  const auto wide = comm->allocate(count * sizeof(float));
  toDevice(in, values);
  toDevice(narrow, poison);
  comm->narrowToBFloat16(static_cast<const float*>(in.get()),
                         static_cast<std::uint16_t*>(narrow.get()), count);
  const std::vector<std::uint16_t> rounded = toHost<std::uint16_t>(narrow, count);
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_EQ(rounded[i], expected[i]) << "float bits 0x" << std::hex << bits[i];

  std::vector<std::uint32_t> widePoison(count);
  for (std::size_t i = 0; i < count; ++i)
    widePoison[i] = (std::uint32_t{expected[i]} << 16) ^ 1u;
  toDevice(wide, widePoison);
  comm->widenFromBFloat16(static_cast<const std::uint16_t*>(narrow.get()),
                          static_cast<float*>(wide.get()), count);
  const std::vector<std::uint32_t> widened = toHost<std::uint32_t>(wide, count);
  for (std::size_t i = 0; i < count; ++i) {
    const float back = fromBFloat16(expected[i]);
    std::uint32_t backBits;
    std::memcpy(&backBits, &back, sizeof backBits);
    ASSERT_EQ(widened[i], backBits) << "bfloat16 bits 0x" << std::hex << expected[i];
  }
}

// The waiter watches the collective's event itself (Note [Host wait on a
// device collective]): it must neither return before the collective ran nor
// miss it. The collective waits behind a host function on the compute
// stream, so the waiter polls well past its first yields.
TEST(Nccl, HostWaitReturnsOnceTheCollectiveRanAndNotBefore) {
  auto comm = makeNccl();
  const int n = comm->size(), r = comm->rank();
  constexpr std::size_t kCount = 1 << 20;
  auto buffer = comm->allocate(kCount * sizeof(float));
  for (int round = 0; round < 3; ++round) {
    toDevice(buffer, std::vector<float>(kCount, static_cast<float>(r + round)));
    static std::atomic<bool> released;
    released = false;
    cudaLaunchHostFunc(
        cuda::computeStream(),
        [](void*) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          released = true;
        },
        nullptr);
    WorkPtr work = comm->allreduce(buffer.get(), kCount, DataType::kFloat32, ReduceOp::kSum);
    work->wait(30s);
    EXPECT_TRUE(released.load()) << "wait() returned before the collective could run";
    EXPECT_TRUE(work->isCompleted());
    const float expected = static_cast<float>(n * round) + n * (n - 1) / 2.0f;
    for (float v : toHost<float>(buffer, kCount))
      ASSERT_FLOAT_EQ(v, expected) << "round " << round;
  }
}

// A host wait shorter than the communicator's timeout gives up on its own,
// naming its own timeout, although it watched the collective itself for all
// of it (Note [Host wait on a device collective]); the collective is not
// failed by it, and completes once the stream lets it run.
TEST(Nccl, HostWaitTimesOutNamingItsTimeoutAndLeavesTheCollectiveRunning) {
  auto comm = makeNccl(60s);
  const int n = comm->size();
  auto buffer = comm->allocate(1024 * sizeof(float));
  toDevice(buffer, std::vector<float>(1024, 1.0f));
  cudaLaunchHostFunc(
      cuda::computeStream(),
      [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); }, nullptr);
  WorkPtr work = comm->allreduce(buffer.get(), 1024, DataType::kFloat32, ReduceOp::kSum);
  try {
    work->wait(200ms);
    FAIL() << "wait(200ms) returned while the stream was held for 1.5 s";
  } catch (const CommTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("did not complete within 0.2 s"), std::string::npos)
        << e.what();
  }
  work->wait(60s);
  for (float v : toHost<float>(buffer, 1024))
    ASSERT_FLOAT_EQ(v, static_cast<float>(n));
}

// A collective that cannot start in time (the compute stream is held by a
// host function longer than the timeout) is reported by the watchdog, which
// fails the Work and every later call instead of letting the host hang.
TEST(Nccl, WatchdogReportsACollectiveThatDoesNotComplete) {
  auto comm = makeNccl(200ms);
  std::atomic<bool> reported{false};
  std::string report;
  bool timedOut = false;
  comm->setFatalHandler([&](const CommError& error) {
    report = error.what();
    timedOut = dynamic_cast<const CommTimeoutError*>(&error) != nullptr;
    reported = true;
  });
  comm->setContext("step 7, bucket 1 of 2");
  auto buffer = comm->allocate(4096);
  cudaLaunchHostFunc(
      cuda::computeStream(),
      [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); }, nullptr);
  WorkPtr work = comm->allreduce(buffer.get(), 1024, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_THROW(work->wait(10s), CommTimeoutError);
  // The handler runs right after the Work fails, on the watchdog thread.
  for (int i = 0; i < 5000 && !reported.load(); ++i)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(reported.load());
  EXPECT_TRUE(timedOut) << "the handler was not given a CommTimeoutError: " << report;
  EXPECT_NE(report.find("step 7, bucket 1 of 2"), std::string::npos) << report;
  EXPECT_NE(report.find("did not complete within 0.2 s"), std::string::npos) << report;
  EXPECT_THROW(comm->allreduce(buffer.get(), 1024, DataType::kFloat32, ReduceOp::kSum),
               CommTimeoutError);
  // The CUDA context is not used again: the aborted collective may still be
  // queued behind the host function, and the job would end here anyway.
}

}  // namespace
}  // namespace ddp::comm
