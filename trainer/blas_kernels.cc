#include "trainer/blas_kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>

#include <array>
#include <cstdlib>
#include <mutex>

#include "runtime/str.h"

namespace ddp::trainer {
namespace {

// OpenBLAS's x86-64 cores whose kernels use AVX2 or wider. Any other known
// name is an older core; a name in neither list (a core newer than this
// file) is kept.
constexpr std::array kAvx2OrWider = {"Haswell",  "Zen",        "Excavator",
                                     "SkylakeX", "Cooperlake", "SapphireRapids"};
constexpr std::array kBelowAvx2 = {
    "Katmai", "Coppermine",  "Northwood", "Prescott",  "Banias",     "Atom",         "Core2",
    "Penryn", "Dunnington",  "Nehalem",   "Athlon",    "Opteron",    "Opteron_SSE3", "Barcelona",
    "Nano",   "Sandybridge", "Bobcat",    "Bulldozer", "Piledriver", "Steamroller"};

template <std::size_t N>
bool named(std::string_view name, const std::array<const char*, N>& names) {
  for (const char* candidate : names) {
    if (name.size() == std::string_view(candidate).size() &&
        strncasecmp(name.data(), candidate, name.size()) == 0)
      return true;
  }
  return false;
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
  return {libraryName(), openblas_get_corename(), ""};
}

std::mutex fitMutex;
bool fitted = false;
BlasKernels fittedKernels;

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
  if (cpu == VectorLevel::kBelowAvx2 || named(chosen, kAvx2OrWider) || !named(chosen, kBelowAvx2))
    return "";
  // The order of OpenBLAS's own fallback for a CPU it cannot name.
  switch (cpu) {
    case VectorLevel::kAvx512Bf16:
      return "Cooperlake";
    case VectorLevel::kAvx512:
      return "SkylakeX";
    default:
      return "Haswell";
  }
}

BlasKernels fitBlasKernelsToCpu() {
  std::lock_guard lock(fitMutex);
  if (fitted) return fittedKernels;
  fitted = true;
  fittedKernels = current();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return fittedKernels;  // the user's choice
  const std::string better = betterBlasCore(fittedKernels.core, cpuVectorLevel());
  using Hook = void (*)();
  const auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (better.empty() || quit == nullptr || init == nullptr) return fittedKernels;
  // Note [OpenBLAS kernels on CPUs newer than the library].
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");  // so that nothing started later takes it for the user's
  const std::string chosenFirst = fittedKernels.core;
  fittedKernels = current();
  if (fittedKernels.core != chosenFirst) fittedKernels.chosenFirst = chosenFirst;
  return fittedKernels;
}

BlasKernels blasKernels() {
  {
    std::lock_guard lock(fitMutex);
    if (fitted) return fittedKernels;
  }
  return current();
}

std::string describe(const BlasKernels& kernels) {
  return str(kernels.library, ", ", kernels.core, " kernels",
             kernels.chosenFirst.empty()
                 ? std::string()
                 : str(" (the library took this CPU for a ", kernels.chosenFirst, ")"));
}

}  // namespace ddp::trainer
