#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "comm/nccl/bfloat16_kernels.h"
#include "comm/nccl/nccl_check.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/memory.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/process_stops.h"

namespace ddp::detail {

void throwNcclError(ncclResult_t code, ncclComm_t comm, const char* call, const char* file,
                    int line) {
  const char* last = ncclGetLastError(comm);
  throw CommError(str(call, " failed on rank ", log::processRank(), " at ", file, ":", line, ": ",
                      ncclGetErrorString(code),
                      last != nullptr && *last != '\0' ? str(" (", last, ")") : std::string()));
}

}  // namespace ddp::detail

namespace ddp::comm {
namespace {

using namespace std::chrono_literals;

ncclDataType_t ncclType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kBFloat16:
      return ncclBfloat16;
  }
  throw InternalError("unknown DataType");
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  throw InternalError("unknown ReduceOp");
}

}  // namespace

// `done` events outlive their issue call (the watchdog polls them, the
// Reducer's finalize waits on them), so they come from a pool instead of one
// cudaEventCreate/Destroy pair per bucket per step. The pool is shared with
// the Works, which may outlive the communicator.
class NcclCommunicator::EventPool {
 public:
  static std::shared_ptr<cuda::Event> take(const std::shared_ptr<EventPool>& pool) {
    std::unique_ptr<cuda::Event> event;
    {
      std::lock_guard lock(pool->mutex_);
      if (!pool->free_.empty()) {
        event = std::move(pool->free_.back());
        pool->free_.pop_back();
      }
    }
    if (!event) event = std::make_unique<cuda::Event>();
    return std::shared_ptr<cuda::Event>(event.release(), [pool](cuda::Event* done) {
      std::lock_guard lock(pool->mutex_);
      pool->free_.emplace_back(done);
    });
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<cuda::Event>> free_;
};

// A collective on the communication stream (Note [NCCL stream ordering]).
class NcclCommunicator::DeviceWork final : public Work {
 public:
  DeviceWork(std::string description, cudaStream_t compute, std::shared_ptr<cuda::Event> done,
             std::shared_ptr<Shared> shared)
      : Work(std::move(description)),
        done(std::move(done)),
        compute_(compute),
        shared_(std::move(shared)) {}

  // Note [Host wait on a device collective].
  void wait(std::chrono::milliseconds timeout) override {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    // Note [Time the process was stopped]: only time this process ran counts.
    stops::Deadline deadline(timeout);
    for (Clock::time_point now = start; !isCompleted() && !deadline.passed(); now = Clock::now()) {
      bool ran = false;
      try {
        ran = done->query();
      } catch (const Error&) {
        break;  // the device failed: the watchdog reports it
      }
      if (ran) {
        // Not a blocking lock: an NCCL call on another thread may hold it
        // for long (connecting to peers), and this wait has a deadline.
        std::unique_lock lock(shared_->mutex, std::try_to_lock);
        if (lock.owns_lock()) {
          if (!shared_->failed) complete();
          break;
        }
      }
      // Asked before the sleep, so that the look after it finds a stop
      // that came in between, before it decides.
      const Clock::time_point due = deadline.nextLook();
      const Clock::duration waited = now - start;
      if (waited < 2ms) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_until(
            std::min(due, Clock::now() + std::min<Clock::duration>(waited / 32, 1ms)));
      }
    }
    waitUntil(deadline, timeout);
  }

  void synchronize(std::chrono::milliseconds) override {
    if (isCompleted()) Work::wait(0ms);  // rethrows the error the watchdog stored, if any
    done->makeWait(compute_);
  }

  const std::shared_ptr<cuda::Event> done;  // on the communication stream: the collective ran
  const std::chrono::steady_clock::time_point issuedAt = std::chrono::steady_clock::now();

 private:
  cudaStream_t compute_;
  std::shared_ptr<Shared> shared_;
};

NcclCommunicator::NcclCommunicator(MPI_Comm base, int device, cudaStream_t computeStream,
                                   CommOptions options)
    : Communicator(options, "nccl"),
      device_(device),
      compute_(computeStream),
      events_(std::make_shared<EventPool>()),
      shared_(std::make_shared<Shared>()) {
  host_ = std::make_unique<MpiCommunicator>(base, options);
  rank_ = host_->rank();
  size_ = host_->size();
  ncclUniqueId id{};
  if (rank_ == 0) DDP_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  host_->broadcast(&id, sizeof id, DataType::kUInt8, 0)->wait(options.timeout);
  DDP_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_), nullptr);
  watchdog_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  std::vector<std::shared_ptr<DeviceWork>> pending;
  {
    std::lock_guard lock(shared_->mutex);
    pending = inFlight_;
  }
  for (auto& work : pending) {
    try {
      work->wait(options().timeout + 1s);  // the watchdog completes or fails it
    } catch (...) {  // reported by whoever waited for it first, or by the watchdog
    }
  }
  {
    std::lock_guard lock(shared_->mutex);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (comm_ != nullptr) {
    if (shared_->failed || !inFlight_.empty()) {
      (void)ncclCommAbort(comm_);
    } else {
      (void)cudaStreamSynchronize(stream_.get());
      (void)ncclCommDestroy(comm_);
    }
  }
}

void NcclCommunicator::setFatalHandler(FatalHandler handler) {
  std::lock_guard lock(shared_->mutex);
  onFatal_ = std::move(handler);
}

std::vector<const ActivityLog*> NcclCommunicator::activityLogs() const {
  std::vector<const ActivityLog*> logs = Communicator::activityLogs();
  for (const ActivityLog* log : host_->activityLogs())
    logs.push_back(log);
  return logs;
}

std::string NcclCommunicator::version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  return str(code / 10000, ".", code % 10000 / 100, ".", code % 100);
}

void NcclCommunicator::throwIfFailed() const {
  if (!shared_->failed) return;
  std::lock_guard lock(shared_->mutex);
  if (failedByTimeout_) throw CommTimeoutError(failure_);
  throw CommError(failure_);
}

WorkPtr NcclCommunicator::issue(const std::string& what,
                                const std::function<void(cudaStream_t)>& call) {
  throwIfFailed();
  auto work = newWork<DeviceWork>(what, str(" (GPU ", device_, ")"), compute_,
                                  EventPool::take(events_), shared_);
  // One `ready` event serves every collective: the wait below captures its
  // state now, so recording it again for the next collective is safe.
  ready_.record(compute_);
  ready_.makeWait(stream_.get());
  if (hold_.count() > 0) {
    auto hold = std::make_unique<std::chrono::milliseconds>(std::exchange(hold_, {}));
    DDP_CUDA_CHECK(cudaLaunchHostFunc(
        stream_.get(),
        [](void* held) {
          const std::unique_ptr<std::chrono::milliseconds> owned(
              static_cast<std::chrono::milliseconds*>(held));
          std::this_thread::sleep_for(*owned);
        },
        hold.get()));
    (void)hold.release();  // the host function owns it now
  }
  bool watchdogIdle = false;
  {
    // Held while NCCL is called, so the watchdog never aborts the
    // communicator in the middle of a call.
    std::lock_guard lock(shared_->mutex);
    if (shared_->failed) {
      throw failedByTimeout_ ? CommTimeoutError(failure_) : CommError(failure_);
    }
    call(stream_.get());
    work->done->record(stream_.get());
    work->markStarted();
    watchdogIdle = inFlight_.empty();
    inFlight_.push_back(work);
  }
  // Note [NCCL watchdog]: woken only from its idle wait.
  if (watchdogIdle) wake_.notify_one();
  return work;
}

void NcclCommunicator::watch() {
  try {
    cuda::setDevice(device_);
  } catch (const Error& e) {
    log::warn(str("NCCL watchdog: ", e.what()));
  }
  std::unique_lock lock(shared_->mutex);
  while (!stopping_) {
    // Note [Time the process was stopped]: a wake far later than asked
    // records a stop, which the timeout below leaves out.
    const auto due = std::chrono::steady_clock::now() + (inFlight_.empty() ? 100ms : 1ms);
    wake_.wait_until(lock, due);
    stops::noteWake(due, std::chrono::steady_clock::now());
    if (shared_->failed || comm_ == nullptr) continue;
    std::string report;
    bool timedOut = false;
    try {
      // One stream runs them in issue order: the first that has not run
      // ends the scan (Note [NCCL watchdog]).
      auto ran = inFlight_.begin();
      for (; ran != inFlight_.end() && (*ran)->done->query(); ++ran)
        (*ran)->complete();
      inFlight_.erase(inFlight_.begin(), ran);
    } catch (const Error& e) {
      report = str("rank ", rank_, " (GPU ", device_,
                   "): the device failed while collectives ran: ", e.what());
    }
    ncclResult_t async = ncclSuccess;
    if (report.empty() && ncclCommGetAsyncError(comm_, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress) {
      const char* last = ncclGetLastError(comm_);
      report = str(
          "rank ", rank_, " (GPU ", device_,
          "): NCCL reported an asynchronous error: ", ncclGetErrorString(async),
          last != nullptr ? str(" (", last, ")") : "",
          inFlight_.empty() ? std::string() : str(" during ", inFlight_.front()->description()));
    }
    if (report.empty() && !inFlight_.empty() &&
        stops::runningSince(inFlight_.front()->issuedAt) > options().timeout) {
      timedOut = true;
      report = str("rank ", rank_, ": ", inFlight_.front()->description(),
                   " did not complete within ", options().timeout.count() / 1000.0,
                   " s (--timeout): a peer rank may have died, stalled or diverged; the NCCL "
                   "communicator was aborted");
    }
    if (report.empty()) continue;

    failure_ = report;
    failedByTimeout_ = timedOut;
    shared_->failed = true;
    (void)ncclCommAbort(comm_);  // the stuck kernels return; nothing may use comm_ now
    comm_ = nullptr;
    std::vector<std::shared_ptr<DeviceWork>> abandoned;
    abandoned.swap(inFlight_);
    FatalHandler handler = onFatal_;
    lock.unlock();
    const CommTimeoutError timeoutError(report);
    const CommError otherError(report);
    const CommError& failure = timedOut ? timeoutError : otherError;
    const std::exception_ptr error =
        timedOut ? std::make_exception_ptr(timeoutError) : std::make_exception_ptr(otherError);
    for (auto& work : abandoned)
      work->complete(error);
    if (handler) handler(failure);
    lock.lock();
  }
}

WorkPtr NcclCommunicator::allreduce(const void* send, void* data, std::size_t count, DataType type,
                                    ReduceOp op) {
  if (!cuda::isDevicePointer(data)) {
    host_->setContext(context());
    return host_->allreduce(send, data, count, type, op);
  }
  const bool floating =
      type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kBFloat16;
  if (op == ReduceOp::kAvg && !floating) {
    throw UsageError("allreduce: average is defined for floating-point types only");
  }
  return issue(str("ncclAllReduce(", dataTypeName(type), " x ", count, ", ", reduceOpName(op), ")"),
               [&](cudaStream_t stream) {
                 DDP_NCCL_CHECK(
                     ncclAllReduce(send, data, count, ncclType(type), ncclOp(op), comm_, stream),
                     comm_);
               });
}

WorkPtr NcclCommunicator::reduceScatter(void* data, std::span<const std::size_t> bounds,
                                        DataType type, ReduceOp op) {
  checkScatterBounds(bounds, size_);
  if (!cuda::isDevicePointer(data)) {
    host_->setContext(context());
    return host_->reduceScatter(data, bounds, type, op);
  }
  const bool floating =
      type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kBFloat16;
  if (op == ReduceOp::kAvg && !floating) {
    throw UsageError("reduceScatter: average is defined for floating-point types only");
  }
  const std::vector<std::size_t> parts(bounds.begin(), bounds.end());
  return issue(str("ncclReduce x ", size_, " (reduce-scatter of ", dataTypeName(type), " x ",
                   parts.back(), ", ", reduceOpName(op), ")"),
               [&](cudaStream_t stream) {
                 char* base = static_cast<char*>(data);
                 DDP_NCCL_CHECK(ncclGroupStart(), comm_);
                 for (int r = 0; r < size_; ++r) {
                   const std::size_t begin = parts[static_cast<std::size_t>(r)];
                   const std::size_t count = parts[static_cast<std::size_t>(r) + 1] - begin;
                   if (count == 0) continue;
                   void* part = base + begin * sizeOf(type);
                   DDP_NCCL_CHECK(
                       ncclReduce(part, part, count, ncclType(type), ncclOp(op), r, comm_, stream),
                       comm_);
                 }
                 DDP_NCCL_CHECK(ncclGroupEnd(), comm_);
               });
}

WorkPtr NcclCommunicator::broadcast(void* data, std::size_t count, DataType type, int root) {
  if (!cuda::isDevicePointer(data)) {
    host_->setContext(context());
    return host_->broadcast(data, count, type, root);
  }
  return issue(str("ncclBroadcast(", dataTypeName(type), " x ", count, ", root ", root, ")"),
               [&](cudaStream_t stream) {
                 DDP_NCCL_CHECK(
                     ncclBroadcast(data, data, count, ncclType(type), root, comm_, stream), comm_);
               });
}

WorkPtr NcclCommunicator::allgather(const void* send, void* recv, std::size_t count,
                                    DataType type) {
  if (!cuda::isDevicePointer(recv)) {
    host_->setContext(context());
    return host_->allgather(send, recv, count, type);
  }
  return issue(
      str("ncclAllGather(", dataTypeName(type), " x ", count, ")"), [&](cudaStream_t stream) {
        DDP_NCCL_CHECK(ncclAllGather(send, recv, count, ncclType(type), comm_, stream), comm_);
      });
}

WorkPtr NcclCommunicator::gather(const void* send, void* recv, std::size_t count, DataType type,
                                 int root) {
  if (cuda::isDevicePointer(send) || (recv != nullptr && cuda::isDevicePointer(recv))) {
    throw UsageError("gather: host memory only (copy device buffers to the host first)");
  }
  host_->setContext(context());
  return host_->gather(send, recv, count, type, root);
}

WorkPtr NcclCommunicator::barrier() {
  throwIfFailed();
  return host_->barrier();
}

void NcclCommunicator::narrowToBFloat16(const float* in, std::uint16_t* out, std::size_t count) {
  bfloat16OnDevice(in, out, count, compute_);
}

void NcclCommunicator::widenFromBFloat16(const std::uint16_t* in, float* out, std::size_t count) {
  float32OnDevice(in, out, count, compute_);
}

std::shared_ptr<void> NcclCommunicator::allocate(std::size_t bytes) {
  throwIfFailed();
  return cuda::allocateDevice(bytes);
}

}  // namespace ddp::comm
