// Typed errors for the whole runtime.
//
// Two families, kept apart on purpose (see docs/architecture.md, "Errors"):
//   * user errors: something the user can fix (an option, a file, ranks that
//     disagree). Their message is the whole story: one line, no stack.
//   * internal errors: a broken invariant inside ddp. The message names the
//     condition and file:line so a bug report can point at it.
// Library failures are CommError (MPI, NCCL) or DeviceError (CUDA, cuBLAS):
// they name the call, file:line, rank and the library's own message.
#pragma once

#include <stdexcept>
#include <string>

#include "runtime/str.h"

namespace ddp {

// Base of every error ddp throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;

  // Set by comm::agree() on the error it rethrows on the rank that raised
  // it: every rank has learnt of the failure and stops, so no peer waits
  // for this one (Note [A rank that leaves training alone] in
  // comm/watchdog.h).
  bool agreed() const { return agreed_; }
  void markAgreed() { agreed_ = true; }

 private:
  bool agreed_ = false;
};

// A bad option value or combination. The launcher exits with kExitUsage.
//
// Note [Usage errors after start-up]
// Most usage errors are found before MPI starts, from the options alone.
// Some need the data or the number of ranks: --eval-samples beyond the test
// set, --drop-last leaving a rank no sample, an optimizer state too small to
// shard over that many ranks. Those are found inside agree() (on one rank or
// on all) and end the job with kExitUsage all the same, on every rank
// (PeerFailedError::usage), so that a script or a batch template can tell
// "fix the command" (2) from "the run failed" (1). A node without the memory
// for the run is not one: the same command runs on a larger node (exit 1).
class UsageError : public Error {
 public:
  using Error::Error;
};

// A usage error that depends on the node, not only on the command line: a
// --data-dir or --config file missing there. Every node's first rank reports
// it, since another node may be the only one without the file.
class NodeUsageError : public UsageError {
 public:
  using UsageError::UsageError;
};

// A bad input file: missing, truncated, wrong magic, out-of-range content.
class DataError : public Error {
 public:
  using Error::Error;
};

// Ranks disagree about something that must be identical (model, options).
class MismatchError : public Error {
 public:
  using Error::Error;
};

// A communication library call failed.
class CommError : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime or cuBLAS call failed (runtime/cuda/cuda_check.h).
class DeviceError : public Error {
 public:
  using Error::Error;
};

// Training produced a NaN or infinity (in the reduced gradients or the loss):
// a bad batch, a learning rate too high, bad initial weights.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

// Not enough host or device memory for what the options ask (a model or a
// batch too large for the node, too many ranks on it): the user's to fix.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// A collective did not complete within its timeout.
class CommTimeoutError : public CommError {
 public:
  using CommError::CommError;
};

// A broken internal invariant: a bug in ddp, not in the user's input.
class InternalError : public Error {
 public:
  using Error::Error;
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

[[noreturn]] void throwInternal(const char* condition, const std::string& message, const char* file,
                                int line);

// The message for an exception that reached the top: e.what(), plus what to
// do where the standard library's text says too little. A thread that could
// not start says only "Resource temporarily unavailable" (found under a tight
// ulimit -v: the communication thread's stack could not be mapped); memory
// that could not be had says "std::bad_alloc".
std::string describeFailure(const std::exception& e);

}  // namespace ddp

// Checks an internal invariant; throws InternalError naming the condition and file:line.
#define DDP_CHECK(cond, message)                                             \
  do {                                                                       \
    if (!(cond)) ::ddp::throwInternal(#cond, (message), __FILE__, __LINE__); \
  } while (0)
