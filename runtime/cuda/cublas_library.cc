#include "runtime/cuda/cublas_library.h"

#include <dlfcn.h>
#include <link.h>

#include <sstream>
#include <vector>

#include "ddp_config.h"
#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/str.h"

namespace ddp::cuda {
namespace {

// The folders of DDP_CUDA_LIBRARY_DIRS ("a:b"), the toolkit's as the build
// found it.
std::vector<std::string> toolkitFolders() {
  std::vector<std::string> folders;
  std::istringstream list(DDP_CUDA_LIBRARY_DIRS);
  for (std::string folder; std::getline(list, folder, ':');)
    if (!folder.empty()) folders.push_back(folder);
  return folders;
}

// A cuBLAS that is there still fails to open under a tight ulimit -v: it
// maps about 670 MiB of address space (190 MiB of it data), measured with
// CUDA 13.0.
std::string limitHint() {
  const std::optional<ProcessMemoryLimit> limit = processMemoryLimit();
  if (!limit) return "";
  return str("; ", limit->describe(),
             ": cuBLAS maps about 670 MiB of address space, raise the limit");
}

// dlerror's message for `path`, which names `path` itself only when the
// file itself failed (not one it needs, such as cuBLASLt).
std::string openFailure(const std::string& path) {
  const char* message = dlerror();
  const std::string text = message != nullptr ? message : "failed";
  return text.rfind(path, 0) == 0 ? text : str(path, ": ", text);
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

// The calls of the cuBLAS open as `library`, from the file `path`. The
// symbols' names are the macros' expansions: cublasSgemm is cublasSgemm_v2
// (Note [cuBLAS opened on first use]).
CublasLibrary lookUpCalls(void* library, const std::string& path) {
#define DDP_CUBLAS_NAME(call) DDP_CUBLAS_NAME_OF(call)
#define DDP_CUBLAS_NAME_OF(symbol) #symbol
  CublasLibrary table;
  link_map* map = nullptr;
  table.file = dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name[0] != 0
                   ? map->l_name
                   : path;
  lookUp(library, DDP_CUBLAS_NAME(cublasCreate), path, table.create);
  lookUp(library, DDP_CUBLAS_NAME(cublasSetStream), path, table.setStream);
  lookUp(library, DDP_CUBLAS_NAME(cublasSetMathMode), path, table.setMathMode);
  lookUp(library, DDP_CUBLAS_NAME(cublasSgemm), path, table.sgemm);
  lookUp(library, DDP_CUBLAS_NAME(cublasSgemv), path, table.sgemv);
  lookUp(library, DDP_CUBLAS_NAME(cublasGetStatusString), path, table.getStatusString);
  lookUp(library, DDP_CUBLAS_NAME(cublasGetProperty), path, table.getProperty);
#undef DDP_CUBLAS_NAME_OF
#undef DDP_CUBLAS_NAME
  return table;
}

}  // namespace

std::string cublasFileName() {
  return str("libcublas.so.", CUBLAS_VER_MAJOR);
}

CublasLibrary openCublas(const std::string& fileName, std::span<const std::string> folders) {
  std::vector<std::string> paths = {fileName};
  for (const std::string& folder : folders)
    paths.push_back(str(folder, "/", fileName));
  std::string tried;
  for (const std::string& path : paths) {
    // RTLD_LOCAL: nothing else in the process resolves symbols against it.
    if (void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
      return lookUpCalls(library, path);
    tried += str(tried.empty() ? "" : "; ", openFailure(path));
  }
  throw DeviceError(str("cannot open cuBLAS, which a GPU run needs (", tried,
                        "): install the CUDA toolkit's cuBLAS ", CUBLAS_VER_MAJOR,
                        " or put its folder on LD_LIBRARY_PATH", limitHint()));
}

std::string cublasDescription() {
  try {
    const CublasLibrary& library = cublas();
    int part[3] = {};
    const libraryPropertyType kinds[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int i = 0; i < 3; ++i)
      if (library.getProperty(kinds[i], &part[i]) != CUBLAS_STATUS_SUCCESS) part[i] = -1;
    return str(part[0], ".", part[1], ".", part[2], ", ", library.file,
               " (opened by GPU runs only)");
  } catch (const std::exception& e) {
    return str("not found: ", e.what());
  }
}

const CublasLibrary& cublas() {
  // A throwing initialiser leaves it uninitialised: the next call tries again.
  static const CublasLibrary kTable = openCublas(cublasFileName(), toolkitFolders());
  return kTable;
}

}  // namespace ddp::cuda
