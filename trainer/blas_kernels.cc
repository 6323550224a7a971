#include "trainer/blas_kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "runtime/str.h"

namespace ddp::trainer {
namespace {

// OpenBLAS's x86-64 cores whose kernels use less than AVX2. Every other
// name (Haswell, Zen, SkylakeX, Cooperlake, or a core newer than this list)
// is kept.
constexpr std::array kBelowAvx2 = {
    "Katmai", "Coppermine",  "Northwood", "Prescott",  "Banias",     "Atom",         "Core2",
    "Penryn", "Dunnington",  "Nehalem",   "Athlon",    "Opteron",    "Opteron_SSE3", "Barcelona",
    "Nano",   "Sandybridge", "Bobcat",    "Bulldozer", "Piledriver", "Steamroller"};

// The x86-64 cores whose kernels use AVX2, AVX-512 and AVX-512 BF16 (the
// last two run the same sgemm kernels).
constexpr std::array kAvx2Cores = {"Haswell", "Zen"};
constexpr std::array kAvx512Cores = {"SkylakeX"};
constexpr std::array kAvx512Bf16Cores = {"Cooperlake", "SapphireRapids"};

template <std::size_t N>
bool named(std::string_view name, const std::array<const char*, N>& cores) {
  for (const char* candidate : cores) {
    if (name.size() == std::string_view(candidate).size() &&
        strncasecmp(name.data(), candidate, name.size()) == 0)
      return true;
  }
  return false;
}

// AVX-512 with or without BF16 counts as one width: their sgemm is the same.
int width(VectorLevel level) {
  return level == VectorLevel::kAvx512Bf16 ? static_cast<int>(VectorLevel::kAvx512)
                                           : static_cast<int>(level);
}

// "OpenBLAS 0.3.21" out of openblas_get_config()'s "OpenBLAS 0.3.21 DYNAMIC_ARCH ...".
std::string libraryName() {
  const std::string config = openblas_get_config();
  const std::size_t version = config.find(' ');
  const std::size_t end =
      version == std::string::npos ? std::string::npos : config.find(' ', version + 1);
  return config.substr(0, end);
}

BlasKernels current() {
  const char* userCore = std::getenv("OPENBLAS_CORETYPE");
  return {libraryName(), openblas_get_corename(), "", userCore != nullptr ? userCore : "",
          cpuVectorLevel()};
}

std::mutex fitMutex;
std::optional<BlasKernels> fitted;  // what fitBlasKernelsToCpu() left running

}  // namespace

VectorLevel cpuVectorLevel() {
#if defined(__x86_64__) && defined(__GNUC__)
  // The builtins count a feature only where the kernel saves its registers.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")) {
    return __builtin_cpu_supports("avx512bf16") ? VectorLevel::kAvx512Bf16 : VectorLevel::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorLevel::kAvx2;
#endif
  return VectorLevel::kBelowAvx2;
}

std::string betterBlasCore(std::string_view chosen, VectorLevel cpu) {
  if (coreVectorLevel(chosen) != VectorLevel::kBelowAvx2) return "";
  // The order of OpenBLAS's own fallback for a CPU it cannot name.
  switch (cpu) {
    case VectorLevel::kAvx512Bf16:
      return "Cooperlake";
    case VectorLevel::kAvx512:
      return "SkylakeX";
    case VectorLevel::kAvx2:
      return "Haswell";
    case VectorLevel::kBelowAvx2:
      return "";
  }
  return "";
}

std::optional<VectorLevel> coreVectorLevel(std::string_view core) {
  if (named(core, kBelowAvx2)) return VectorLevel::kBelowAvx2;
  if (named(core, kAvx2Cores)) return VectorLevel::kAvx2;
  if (named(core, kAvx512Cores)) return VectorLevel::kAvx512;
  if (named(core, kAvx512Bf16Cores)) return VectorLevel::kAvx512Bf16;
  return std::nullopt;
}

std::string_view vectorLevelName(VectorLevel level) {
  switch (level) {
    case VectorLevel::kBelowAvx2:
      return "less than AVX2";
    case VectorLevel::kAvx2:
      return "AVX2";
    case VectorLevel::kAvx512:
      return "AVX-512";
    case VectorLevel::kAvx512Bf16:
      return "AVX-512 BF16";
  }
  return "";
}

BlasKernels fitBlasKernelsToCpu() {
  std::lock_guard lock(fitMutex);
  if (fitted) return *fitted;
  fitted = current();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return *fitted;  // the user's choice
  const std::string better = betterBlasCore(fitted->core, cpuVectorLevel());
  using Hook = void (*)();
  const auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (better.empty() || quit == nullptr || init == nullptr) return *fitted;
  // Note [OpenBLAS kernels on CPUs newer than the library].
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");  // so that nothing started later takes it for the user's
  const std::string chosenFirst = fitted->core;
  fitted = current();
  if (fitted->core != chosenFirst) fitted->chosenFirst = chosenFirst;
  return *fitted;
}

BlasKernels blasKernels() {
  {
    std::lock_guard lock(fitMutex);
    if (fitted) return *fitted;
  }
  return current();
}

bool restartBlasThreads() {
  using Hook = void (*)();
  const auto shutdown = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  if (shutdown == nullptr) return false;
  shutdown();
  return true;
}

std::string describe(const BlasKernels& kernels) {
  std::string why;
  if (!kernels.chosenFirst.empty()) {
    why = str(" (the library took this CPU for a ", kernels.chosenFirst, ")");
  } else if (const auto level = coreVectorLevel(kernels.core);
             !kernels.userCore.empty() && level && width(*level) < width(kernels.cpu)) {
    // Note [OpenBLAS kernels on CPUs newer than the library]: kept, but said.
    why = str(" (OPENBLAS_CORETYPE=", kernels.userCore, ": ", vectorLevelName(*level),
              " kernels on a CPU with ", vectorLevelName(kernels.cpu), ")");
  }
  return str(kernels.library, ", ", kernels.core, " kernels", why);
}

}  // namespace ddp::trainer
