#include "runtime/cuda/cublas_library.h"

#include <dlfcn.h>

#include <vector>

#include "ddp_config.h"
#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp::cuda {
namespace {

// The folders of DDP_CUDA_LIBRARY_DIRS ("a:b"), the toolkit's as the build
// found it.
std::vector<std::string> toolkitFolders() {
  std::vector<std::string> folders;
  const std::string list = DDP_CUDA_LIBRARY_DIRS;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    if (end > start) folders.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return folders;
}

template <typename Function>
void lookUp(void* library, const char* symbol, const std::string& path, Function& function) {
  dlerror();  // clear an earlier message
  void* address = dlsym(library, symbol);
  if (address == nullptr) {
    const char* message = dlerror();
    throw DeviceError(str("cuBLAS: ", path, " has no ", symbol, " (",
                          message != nullptr ? message : "a null symbol",
                          "): it is not the cuBLAS ", CUBLAS_VER_MAJOR,
                          " that ddp was built with; rebuild ddp against it or put the "
                          "right one first on LD_LIBRARY_PATH"));
  }
  function = reinterpret_cast<Function>(address);
}

}  // namespace

std::string cublasFileName() {
  return str("libcublas.so.", CUBLAS_VER_MAJOR);
}

CublasLibrary openCublas(const std::string& fileName, std::span<const std::string> folders) {
  // RTLD_LOCAL: nothing else in the process resolves symbols against it.
  void* library = dlopen(fileName.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string path = fileName, tried = str(fileName, ": ", dlerror());
  for (std::size_t i = 0; library == nullptr && i < folders.size(); ++i) {
    path = str(folders[i], "/", fileName);
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) tried += str("; ", dlerror());
  }
  if (library == nullptr) {
    throw DeviceError(str("cannot open cuBLAS, which a GPU run needs (", tried,
                          "): install the CUDA toolkit's cuBLAS ", CUBLAS_VER_MAJOR,
                          " or put its folder on LD_LIBRARY_PATH"));
  }
  // The symbols' names are the macros' expansions: cublasSgemm is
  // cublasSgemm_v2 (Note [cuBLAS opened on first use]).
#define DDP_CUBLAS_NAME(call) DDP_CUBLAS_NAME_OF(call)
#define DDP_CUBLAS_NAME_OF(symbol) #symbol
  CublasLibrary table;
  lookUp(library, DDP_CUBLAS_NAME(cublasCreate), path, table.create);
  lookUp(library, DDP_CUBLAS_NAME(cublasSetStream), path, table.setStream);
  lookUp(library, DDP_CUBLAS_NAME(cublasSetMathMode), path, table.setMathMode);
  lookUp(library, DDP_CUBLAS_NAME(cublasSgemm), path, table.sgemm);
  lookUp(library, DDP_CUBLAS_NAME(cublasSgemv), path, table.sgemv);
  lookUp(library, DDP_CUBLAS_NAME(cublasGetStatusString), path, table.getStatusString);
#undef DDP_CUBLAS_NAME_OF
#undef DDP_CUBLAS_NAME
  return table;
}

const CublasLibrary& cublas() {
  // A throwing initialiser leaves it uninitialised: the next call tries again.
  static const CublasLibrary table = openCublas(cublasFileName(), toolkitFolders());
  return table;
}

}  // namespace ddp::cuda
