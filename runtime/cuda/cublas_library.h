// cuBLAS, opened by the first GPU run of a process rather than linked.
//
// Note [cuBLAS opened on first use]
// A process linked against libcublas maps and relocates cuBLAS and cuBLASLt
// before main: about 150 MiB resident and 0.6 s of CPU per process (a C++
// program that only links them, RESULTS.md "What linking cuBLAS cost a CPU
// run"), paid by every rank of a CPU run of a CUDA build, which never calls
// it. So ddp does not link cuBLAS. cublas() opens libcublas.so.<N>, N being
// the major version of the headers ddp was compiled against, with dlopen
// when a GPU run first needs it (ddp_train: once it has chosen the rank's
// GPU, launcher/placement.cc, so that a failure is agreed on and reported
// once; other programs: the compute stream's handle, runtime/cuda/context.h),
// and looks up the calls ddp makes. The signatures come from the headers
// (decltype), so a call through the table is checked by the compiler as a
// direct one would be, and the symbol looked up is the one the headers name
// (cublasSgemm is cublasSgemm_v2). The CUDA runtime and NCCL stay linked:
// they cost about 1 MiB.
#pragma once

#include <cublas_v2.h>

#include <span>
#include <string>

namespace ddp::cuda {

// The cuBLAS calls ddp makes, each the function of the same name in
// cublas_v2.h.
struct CublasLibrary {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasSetStream) setStream = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasSgemv) sgemv = nullptr;
  decltype(&cublasGetStatusString) getStatusString = nullptr;
  decltype(&cublasGetProperty) getProperty = nullptr;
  std::string file;  // the file opened, as the loader found it
};

// The table, opened on the first call from any thread (thread-safe; the
// library stays open until the process exits). Throws DeviceError when the
// library or one of its calls cannot be found, naming the file, the folders
// tried and dlerror's message; a later call throws the same again.
const CublasLibrary& cublas();

// "libcublas.so.13": the file cublas() opens, found as the dynamic loader
// finds libraries (LD_LIBRARY_PATH, the program's run path, ld.so.cache),
// then in the toolkit's library folders that the build found.
std::string cublasFileName();

// For --version and bug reports: "13.1.0, /usr/local/cuda/lib64/libcublas.so.13
// (opened by GPU runs only)", or why it cannot be opened. Opens it (about
// 0.5 s); never throws.
std::string cublasDescription();

// Opens `fileName` as cublas() does, trying `folders` after the loader's own
// search, and returns a new table. cublas() calls it once; tests call it with
// files that are not there.
CublasLibrary openCublas(const std::string& fileName, std::span<const std::string> folders);

}  // namespace ddp::cuda
