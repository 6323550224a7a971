// Subnormal floats flushed to zero on the CPU, as TensorFlow's threads do by
// default and PyTorch's after torch.set_flush_denormal(True).
//
// Note [Subnormal floats]
// A float32 below 2^-126 (1.2e-38) in magnitude is subnormal, and x86 CPUs
// compute with one through a microcode assist about a hundred times slower
// than the arithmetic itself. Training makes them where a value keeps
// shrinking without reaching zero: when every ReLU of a layer has died, the
// layers below get gradients of 1e-28 and less, and SGD's momentum (0.9 of
// itself each step) and AdamW's running averages decay through the
// subnormal range and stay there. Measured here (benchmarks/RESULTS.md,
// "Subnormal floats"): such a run's step took 13x as long once 87% of its
// momentum was subnormal (its optimizer 1.05 against 0.019 ms), and
// PyTorch's SGD step on the same state is 10x slower by default.
// So ddp_train sets the CPU to flush them: results below 2^-126 become 0
// (FTZ) and subnormal inputs are read as 0 (DAZ). Only values already
// below 2^-126 change, to 0 (a training run's are ones on their way there:
// one epoch of the README's command, SGD or AdamW, ends with the same bits
// either way), and every rank flushes alike, so the ranks stay identical and
// runs reproducible. --keep-subnormals keeps IEEE 754's gradual underflow,
// as PyTorch computes by default.
//
// The mode belongs to each thread, and a thread starts with its creator's:
// setting it on the main thread before any other thread starts gives it to
// the communication threads, MPI's and the data threads. OpenBLAS starts its
// threads when the library loads, before main(), so they are restarted
// (trainer::restartBlasThreads). GPU kernels are not affected: CUDA decides
// subnormal handling per kernel when it is compiled (nvcc's -ftz), and NVIDIA
// GPUs handle float32 subnormals in hardware, without a slow path.
#pragma once

namespace ddp {

// Sets (true) or clears (false) flushing of subnormal floats for the calling
// thread, and for the threads it starts from now on (Note [Subnormal floats]).
// Returns false, changing nothing, on a CPU where ddp does not know how
// (anything but x86-64).
bool setFlushSubnormals(bool flush);

// Whether the calling thread flushes subnormal floats to zero.
bool flushesSubnormals();

}  // namespace ddp
