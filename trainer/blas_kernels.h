// Which of OpenBLAS's kernels run the CPU path's GEMMs, fitted to the CPU
// at start-up.
//
// Note [OpenBLAS kernels on CPUs newer than the library]
// An OpenBLAS built for many CPUs (DYNAMIC_ARCH, as Debian's is) picks its
// kernels when it loads, from the CPU's family and model. For a CPU it
// cannot name it chooses by the vector extensions the CPU has (Cooperlake
// with AVX-512 BF16, SkylakeX with AVX-512, Haswell with AVX2), but some
// models it does not know fall into an older case instead: Debian 12's
// OpenBLAS 0.3.21 takes an Intel Xeon of family 6, model 207 (Emerald
// Rapids) for a Prescott and runs SSE3 kernels, its single-thread sgemm
// 3.3x to 4.2x slower than with its AVX-512 ones, ddp_train's step 3x slower
// (benchmarks/RESULTS.md, "OpenBLAS on a CPU newer than itself"). So when
// the kernels chosen use less than AVX2 and the CPU (with the kernel's
// support for its registers) has AVX2 and FMA, OpenBLAS chooses again, as
// its own fallback would have: OPENBLAS_CORETYPE, the variable it documents
// for choosing, names the core, gotoblas_dynamic_quit() forgets the first
// choice and gotoblas_dynamic_init() makes it again, reading the variable.
// Both are exported by DYNAMIC_ARCH builds and looked up at run time, so a
// library without them is left alone. A choice of AVX2 or better is kept
// (the library knew the CPU), and so is the user's (OPENBLAS_CORETYPE set
// when the program started), but describe() says when the user's kernels
// are narrower than the CPU's vector units: a machine image that sets
// OPENBLAS_CORETYPE=Haswell for every program runs AVX2 kernels on an AMD
// EPYC with AVX-512, whose single-thread sgemm is 1.5x to 1.9x faster with
// the library's own choice (RESULTS.md, "OpenBLAS on a CPU newer than
// itself"), and nothing else in a run shows it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ddp::trainer {

// The widest vector extension the CPU has and the kernel saves the
// registers of.
enum class VectorLevel { kBelowAvx2, kAvx2, kAvx512, kAvx512Bf16 };

// This CPU's (cpuid through the compiler's builtins).
VectorLevel cpuVectorLevel();

// The OpenBLAS core to choose instead of `chosen` on a CPU of level `cpu`,
// or "" to keep `chosen` (Note [OpenBLAS kernels on CPUs newer than the
// library]). Core names are OpenBLAS's ("Prescott", "Haswell", "SkylakeX",
// "Cooperlake"); an unknown name is kept.
std::string betterBlasCore(std::string_view chosen, VectorLevel cpu);

// The vector extension `core`'s kernels use, for the cores this file knows
// (case ignored); nullopt for any other.
std::optional<VectorLevel> coreVectorLevel(std::string_view core);

// "AVX2", "AVX-512", "AVX-512 BF16", or "less than AVX2".
std::string_view vectorLevelName(VectorLevel level);

struct BlasKernels {
  std::string library;      // "OpenBLAS 0.3.21"
  std::string core;         // whose kernels run: "SkylakeX"
  std::string chosenFirst;  // what OpenBLAS had chosen, when it was changed ("Prescott"); else ""
  std::string userCore;     // OPENBLAS_CORETYPE, when the user set it; else ""
  VectorLevel cpu = VectorLevel::kBelowAvx2;  // this CPU's
};

// Chooses OpenBLAS's kernels again where the Note above says so, and
// returns what runs. Call it first thing in main(), before any BLAS call
// and before any thread is started (it sets and then unsets
// OPENBLAS_CORETYPE). Later calls change nothing.
BlasKernels fitBlasKernelsToCpu();

// What runs now; the same as fitBlasKernelsToCpu() returned, if it ran.
BlasKernels blasKernels();

// "OpenBLAS 0.3.21, Cooperlake kernels (the library took this CPU for a
// Prescott)", "OpenBLAS 0.3.21, Haswell kernels (OPENBLAS_CORETYPE=Haswell:
// AVX2 kernels on a CPU with AVX-512)" or "OpenBLAS 0.3.21, Haswell kernels".
std::string describe(const BlasKernels& kernels);

// Stops OpenBLAS's threads, which it started when it loaded, so that the
// next BLAS call starts them again from the calling thread: they then take
// that thread's floating-point mode (Note [Subnormal floats] in
// runtime/subnormals.h). OpenBLAS stops them the same way before a fork
// (blas_thread_shutdown_, looked up at run time: a library without it is left
// alone, and false returned). Call it with no BLAS call running, from the
// main thread.
bool restartBlasThreads();

}  // namespace ddp::trainer
