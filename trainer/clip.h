// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_:
//   norm  = sqrt(sum of g^2 over every element of every trainable gradient)
//   scale = min(1, maxNorm / (norm + 1e-6))       (float32, as PyTorch)
//   g     = scale * g, before the optimizer reads g
//
// Note [Clipping the averaged gradient]
// Under data parallelism the norm is that of the averaged gradient, after the
// all-reduce: what a PyTorch DDP user gets by calling clip_grad_norm_ after
// backward(). Every rank holds that gradient bit for bit, so every rank
// computes the norm on its own, with no communication, and gets the same
// scale, provided the sum is taken in a fixed order: on the CPU the MPI
// backend sums the squares while it reduces (Note [Sum of squares while
// reducing] in comm/finite.h), in double; the GPU sums in a fixed grid whose
// partial sums one block adds in a fixed order, never with atomics (whose
// order varies between runs and between ranks, and the replicas would drift
// apart by rounding).
// The scale costs no pass of its own: the optimizer multiplies each gradient
// by it as it reads it (StepInputs in trainer/optimizer.h), which is PyTorch's
// g *= scale followed by the step. A scale of 1 changes nothing (1 x g == g),
// so a run whose norm stays under the limit is the unclipped run exactly.
#pragma once

#if defined(__CUDACC__)
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

namespace ddp::trainer {

// PyTorch's guard against a zero norm.
inline constexpr float kClipEpsilon = 1e-6f;

// The factor the gradients are multiplied by: 1 when `norm` is within
// `maxNorm` (always when maxNorm is infinite), and 1 for a NaN norm, whose
// step the non-finite check stops or skips anyway.
DDP_HOST_DEVICE inline float clipScale(float norm, float maxNorm) {
  const float coefficient = maxNorm / (norm + kClipEpsilon);
  return coefficient < 1.0f ? coefficient : 1.0f;
}

}  // namespace ddp::trainer
