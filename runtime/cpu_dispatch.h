// Functions compiled twice, for the baseline x86-64 (SSE2) the build targets
// and for AVX2, the CPU choosing between them when the program loads (GCC's
// target_clones): for loops whose arithmetic, not memory traffic, is their
// cost. The bfloat16 conversions are (comm/bfloat16.cc; with AVX2 the
// shared-memory sum that rounds to bfloat16 went from 1.75-2.17x to
// 1.08-1.18x the float32 all-reduce, the staged path's from 2.3-2.7x to
// 1.5-1.8x: benchmarks/RESULTS.md, "bf16 rounded inside the shared-memory
// sum"); a float32 sum, which waits on memory, is not. The results are the
// same bits either way: the loops are integer steps and single float32
// additions and multiplications, which AVX2 neither fuses nor reorders.
//
// Off under ThreadSanitizer, whose processes crashed at start-up with the
// clones' resolver in them (scripts/sanitize.sh thread), and where the
// compiler or CPU is not x86-64 GCC or Clang.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define DDP_ALSO_FOR_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define DDP_ALSO_FOR_AVX2
#endif
