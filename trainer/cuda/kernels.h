// The CUDA kernels of the trainer's layers, loss and optimizer.
//
// Each function launches on the compute stream (Note [One compute stream] in
// runtime/cuda/context.h) and returns without waiting; pointers are device
// memory owned by the caller, which keeps it alive until the stream has run
// (tensors do: their memory is freed with cudaFree, which waits). Shapes are
// row-major, as in the CPU implementations these kernels mirror: the CPU code
// is the reference, and tests/cuda compares the two.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddp::trainer::cuda {

void fill(float* data, std::size_t count, float value);

// y[r][c] = bias[c] for every row: the bias term, before the GEMM adds x W^T.
void broadcastRows(const float* bias, float* y, std::size_t rows, std::size_t cols);

void reluForward(const float* x, float* y, std::size_t count);
// dx = y > 0 ? dy : 0 (y is the forward output).
void reluBackward(const float* y, const float* dy, float* dx, std::size_t count);

// Per row of `logits` [rows, classes]: the softmax into `probabilities`, the
// loss -log p[label] and whether the arg-max is the label. Then, in a fixed
// order (deterministic, unlike atomics): *lossSum += weight * (mean loss over
// the rows) and *correct += rows whose arg-max is the label. `rowLoss` is
// scratch of 2 x `rows` doubles. Labels must be in [0, classes): the data readers
// validate them on load.
void softmaxCrossEntropyForward(const float* logits, const std::int32_t* labels,
                                float* probabilities, double* rowLoss, std::size_t rows,
                                std::size_t classes, double weight, double* lossSum,
                                double* correct);

// grad = scale * (probabilities - onehot(labels)) / rows.
void softmaxCrossEntropyBackward(const float* probabilities, const std::int32_t* labels,
                                 float* grad, std::size_t rows, std::size_t classes,
                                 float lossScale);

// One SGD step with PyTorch's rule (trainer/sgd.h) over `count` elements.
// `buffer` is the momentum buffer (ignored when momentum is 0); `first`: the
// buffer is initialised from this gradient. `skip` (device memory, may be
// null): when *skip is non-zero as the kernel runs, nothing is written, so a
// flag computed earlier on the stream can cancel the step with no host
// round trip (--skip-nonfinite, Note [Skipping a step on the device] in
// trainer/optimizer.h). `gradScale` (device memory, may be null): the gradient is
// multiplied by *gradScale as it is read (clipByNorm's scale).
void sgdUpdate(float* parameter, const float* grad, float* buffer, std::size_t count, float lr,
               float momentum, float weightDecay, bool nesterov, bool first,
               const std::int32_t* skip = nullptr, const float* gradScale = nullptr);

// AdamW (trainer/adamw.h), in two parts so that no step count ever reaches
// the host. adamwBeginStep (one thread) adds 1 to *step unless *skip is
// raised, then writes the step's factors: factors[0] = lr / (1 - beta1^t),
// factors[1] = sqrt(1 - beta2^t), computed in double as on the CPU.
// adamwUpdate then updates `count` elements of one parameter with them:
// `decay` is 1 - lr * weight_decay; `expAvg` and `expAvgSq` the moments;
// `skip` and `gradScale` as for sgdUpdate. All pointers are device memory.
void adamwBeginStep(float* step, float* factors, float lr, float beta1, float beta2,
                    const std::int32_t* skip = nullptr);
void adamwUpdate(float* parameter, const float* grad, float* expAvg, float* expAvgSq,
                 std::size_t count, float decay, float beta1, float beta2, float eps,
                 const float* factors, const std::int32_t* skip = nullptr,
                 const float* gradScale = nullptr);

// Partial sums of clipByNorm: this many doubles of scratch.
inline constexpr std::size_t kNormPartials = 256;

// The L2 norm of data[0, count) into *norm and the clipping factor
// clipScale(norm, maxNorm) into *scale (trainer/clip.h), all device memory,
// with no host round trip. Deterministic: a fixed grid of kNormPartials
// blocks writes partial sums of squares (double) to `partials`, and one
// block adds them in a fixed order (Note [Clipping the averaged gradient]).
void clipByNorm(const float* data, std::size_t count, float maxNorm, double* partials, float* norm,
                float* scale);

// clipByNorm in two halves, for a gradient whose parts are on different
// ranks (Note [Reduce-scatter for a sharded optimizer] in comm/reducer.h).
// sumOfSquares writes the sum of the squares of data[0, count) to *total
// (device memory), added as clipByNorm adds them (`partials`: kNormPartials
// doubles of scratch). clipByNormOfParts takes `parts` such sums (the
// ranks', gathered), adds them in a fixed order, and writes the norm and
// the clipping factor as clipByNorm does. With one part the two give
// clipByNorm's bits.
void sumOfSquares(const float* data, std::size_t count, double* partials, double* total);
void clipByNormOfParts(const double* squares, std::size_t parts, float maxNorm, float* norm,
                       float* scale);

// Sets *flag (device memory) to 1 if any of data[0, count) is a NaN or an
// infinity; leaves it alone otherwise, so the caller zeroes it first and
// several launches may share one flag.
void flagNonFinite(const float* data, std::size_t count, std::int32_t* flag);

}  // namespace ddp::trainer::cuda
