// The NCCL backend of Communicator, for device memory.
//
// Note [NCCL stream ordering]
// The caller computes on one stream (Note [One compute stream] in
// runtime/cuda/context.h). NCCL runs on a communication stream of its own, so
// an all-reduce overlaps whatever the compute stream runs next. Per collective:
//   1. `ready` is recorded on the compute stream: the kernels that wrote the
//      buffer are ahead of it;
//   2. the communication stream waits on `ready`;
//   3. the NCCL call is issued on the communication stream;
//   4. `done` is recorded on the communication stream.
// Work::synchronize() makes the compute stream wait on `done`, so the
// kernels that read the result (the optimizer) run after it, and the host
// never blocks. Work::wait() blocks the host until `done` has run (Note
// [Host wait on a device collective]).
//
// Note [Host wait on a device collective]
// A thread that waits on the host (a benchmark, a caller that reads the
// result on the host) should wake as soon as the collective ran, as
// cudaStreamSynchronize would. The watchdog polls only every millisecond,
// and waking it and then the waiter costs two thread hand-offs: on an H200
// a wait on a one-rank all-reduce took up to 1.1 ms, against 2 to 27 us for
// ncclAllReduce and a stream synchronize. So the waiter watches `done`
// itself: it queries the event, yielding for the first 2 ms, then sleeping
// for 1/32 of the time it has waited (at most 1 ms). The first version
// yielded for 50 us only: a wait that outlasted that slept, and Linux's
// 50 us timer slack makes any sleep last 50 us at least, the likely cause of
// 74 us against 14 us raw at 8 MiB on the H200. Past 2 ms a sleep adds
// about 5% at most, and less as the wait grows. When
// `done` has run the waiter completes the Work under the communicator's
// lock (if it is free: an NCCL call may hold it for long; else it polls
// on), unless the communicator has failed: an abort also lets the stuck
// kernels return, and the watchdog then completes the Work with the report.
// Whichever of the waiter and the watchdog completes it first counts
// (Work::complete). A device error (query() throws) is left to the watchdog
// to report.
//
// Host memory (loss and accuracy sums, the Reducer's layout check) goes
// through an MPI communicator that this one owns: NCCL wants device memory,
// and Debian's Open MPI is not CUDA-aware. Each kind keeps its own issue
// order, identical on every rank because every rank runs the same program.
//
// Note [NCCL watchdog]
// A collective waiting for a dead or stalled peer never returns, and with
// host-free ordering nothing on the host would notice until the next
// synchronisation hangs too. A watchdog thread polls, every millisecond, the
// `done` events of the collectives in flight and ncclCommGetAsyncError. On an
// asynchronous error, or a collective older than the timeout, it aborts the
// communicator (ncclCommAbort: the stuck kernels return), fails every Work in
// flight with a report naming the rank, GPU, collective and context (step,
// bucket), and calls the fatal handler (ddp_train's logs the report and ends
// the job, once with the training thread: Note [One thread ends the job] in
// launcher/job_ending.h). Afterwards every call on this communicator throws
// that report.
// The watchdog costs the issuing thread as little as it can, since a step
// issues a collective per bucket: an issue wakes it only from its idle wait
// (nothing in flight: 100 ms), as it polls every millisecond otherwise, and
// a poll stops at the first collective that has not run (the communication
// stream runs them in issue order). Before, every issue woke it, and each
// time it took the lock and queried every event in flight, while the
// issuing thread waited for that lock to issue the next bucket (a likely
// part of the 17 us per bucket measured on the H200, benchmarks/RESULTS.md;
// not measured since).
// The watchdog never aborts during an NCCL call (ncclCommAbort must not run
// beside another call on the communicator), so a call that itself blocks
// (NCCL may set up its connections inside the first collectives, waiting
// for peers) is beyond it; the process watchdog ends the job then, at
// --timeout plus a grace (Note [Where a stuck rank is] in comm/watchdog.h).
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"

namespace ddp::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `base`: rank 0 creates the NCCL unique id, MPI broadcasts
  // it, every rank joins with ncclCommInitRank. `device` must be the calling
  // thread's current CUDA device (cuda::setDevice), one per rank;
  // `computeStream` is the stream whose kernels write and read the buffers.
  // Throws CommError (NCCL) or DeviceError (CUDA).
  NcclCommunicator(MPI_Comm base, int device, cudaStream_t computeStream, CommOptions options);
  // Waits for the collectives in flight (bounded by the watchdog), stops the
  // watchdog and destroys (or, after a failure, aborts) the communicator.
  // Never throws.
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return "nccl"; }
  // The NCCL collectives' log, then the host (MPI) collectives' log.
  std::vector<const ActivityLog*> activityLogs() const override;

  // Device buffers: NCCL on the communication stream (Note [NCCL stream
  // ordering]); host buffers: the owned MPI communicator.
  WorkPtr allreduce(const void* send, void* recv, std::size_t count, DataType type,
                    ReduceOp op) override;
  // Device buffers: one ncclReduce per non-empty part, rooted at its owner,
  // in one NCCL group (ncclReduceScatter needs equal parts).
  WorkPtr reduceScatter(void* data, std::span<const std::size_t> bounds, DataType type,
                        ReduceOp op) override;
  WorkPtr broadcast(void* data, std::size_t count, DataType type, int root) override;
  WorkPtr allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  // Host memory only, through the owned MPI communicator.
  WorkPtr gather(const void* send, void* recv, std::size_t count, DataType type, int root) override;
  WorkPtr barrier() override;  // every rank reached it (through MPI)
  // Zeroed device memory on this rank's GPU.
  std::shared_ptr<void> allocate(std::size_t bytes) override;
  Memory allocatedMemory() const override { return Memory::kDevice; }
  // Kernels on the compute stream (comm/nccl/bfloat16_kernels.h); device
  // memory only.
  void narrowToBFloat16(const float* in, std::uint16_t* out, std::size_t count) override;
  void widenFromBFloat16(const std::uint16_t* in, float* out, std::size_t count) override;
  // The next device collective waits `hold` behind a host function on the
  // communication stream (--inject-fault hang): the NCCL watchdog sees it
  // pending as it would a stuck kernel.
  void holdNextCollective(std::chrono::milliseconds hold) override { hold_ = hold; }

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::broadcast;

  // Called once, on the watchdog thread, with the failure of a collective
  // (Note [NCCL watchdog]): a CommTimeoutError for one that timed out, else
  // a CommError; its what() is the report. The Works in flight have failed
  // with the same error by then, so the issuing thread may meet it at once
  // too: a caller that ends the job from both ends it once (ddp_train: Note
  // [One thread ends the job] in launcher/job_ending.h). It may end the
  // process.
  using FatalHandler = std::function<void(const CommError& error)>;
  void setFatalHandler(FatalHandler handler);

  // The NCCL version in use ("2.28.9").
  static std::string version();

 private:
  class DeviceWork;
  class EventPool;
  // The lock and the failure flag, shared with the Works (which may outlive
  // the communicator) so that a waiter can complete its own (Note [Host wait
  // on a device collective]).
  struct Shared {
    std::mutex mutex;  // guards the communicator's state below, and changes of `failed`
    std::atomic<bool> failed{false};
  };
  WorkPtr issue(const std::string& what, const std::function<void(cudaStream_t)>& call);
  void watch();
  void throwIfFailed() const;

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  cudaStream_t compute_;
  std::unique_ptr<MpiCommunicator> host_;
  ncclComm_t comm_ = nullptr;
  cuda::Stream stream_;                // the communication stream
  cuda::Event ready_;                  // recorded on the compute stream before each collective
  std::chrono::milliseconds hold_{0};  // holdNextCollective's; issuing thread
  std::shared_ptr<EventPool> events_;

  std::shared_ptr<Shared> shared_;  // its mutex guards everything below
  std::condition_variable wake_;
  std::vector<std::shared_ptr<DeviceWork>> inFlight_;
  std::string failure_;  // the report, once failed
  bool failedByTimeout_ = false;
  FatalHandler onFatal_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace ddp::comm
