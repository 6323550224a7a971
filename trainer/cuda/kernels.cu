#include <cfloat>
#include <climits>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/grid.cuh"
#include "trainer/clip.h"
#include "trainer/cuda/kernels.h"

namespace ddp::trainer::cuda {
namespace {

using ddp::cuda::blocksFor;
// The block size of every kernel here; the norms' shared arrays and
// reduction trees are sized by it.
constexpr unsigned kThreads = ddp::cuda::kThreadsPerBlock;
constexpr unsigned kWarp = 32;

// Elementwise kernels: grid-stride loops (runtime/cuda/grid.cuh).
__global__ void fillKernel(float* data, std::size_t count, float value) {
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    data[i] = value;
}

__global__ void broadcastRowsKernel(const float* bias, float* y, std::size_t rows,
                                    std::size_t cols) {
  const std::size_t count = rows * cols;
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    y[i] = bias[i % cols];
}

__global__ void reluForwardKernel(const float* x, float* y, std::size_t count) {
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void reluBackwardKernel(const float* y, const float* dy, float* dx, std::size_t count) {
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// One warp per row. The arg-max takes the first maximum, as std::max_element
// does on the CPU.
__global__ void softmaxRowsKernel(const float* logits, const std::int32_t* labels,
                                  float* probabilities, double* rowLoss, std::size_t rows,
                                  std::size_t classes) {
  const std::size_t row = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / kWarp;
  const unsigned lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const float* z = logits + row * classes;
  float* p = probabilities + row * classes;
  float best = -FLT_MAX;
  int arg = INT_MAX;
  for (std::size_t c = lane; c < classes; c += kWarp) {
    if (z[c] > best) {
      best = z[c];
      arg = static_cast<int>(c);
    }
  }
  for (unsigned offset = kWarp / 2; offset > 0; offset /= 2) {
    const float otherBest = __shfl_xor_sync(0xffffffffu, best, offset);
    const int otherArg = __shfl_xor_sync(0xffffffffu, arg, offset);
    if (otherBest > best || (otherBest == best && otherArg < arg)) {
      best = otherBest;
      arg = otherArg;
    }
  }
  double sum = 0.0;
  for (std::size_t c = lane; c < classes; c += kWarp) {
    const float e = expf(z[c] - best);
    p[c] = e;
    sum += e;
  }
  for (unsigned offset = kWarp / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inverse = static_cast<float>(1.0 / sum);
  for (std::size_t c = lane; c < classes; c += kWarp)
    p[c] *= inverse;
  if (lane == 0) {
    const int label = labels[row];
    // -log softmax = log(sum) - (z_label - zmax), as on the CPU; then 1 if
    // the row is classified correctly.
    rowLoss[2 * row] = log(sum) - static_cast<double>(z[label] - best);
    rowLoss[2 * row + 1] = arg == label ? 1.0 : 0.0;
  }
}

// One block sums the per-row values in a fixed order: deterministic.
__global__ void sumRowsKernel(const double* rowLoss, std::size_t rows, double weight,
                              double* lossSum, double* correct) {
  __shared__ double loss[kThreads];
  __shared__ double hits[kThreads];
  double myLoss = 0.0, myHits = 0.0;
  for (std::size_t r = threadIdx.x; r < rows; r += blockDim.x) {
    myLoss += rowLoss[2 * r];
    myHits += rowLoss[2 * r + 1];
  }
  loss[threadIdx.x] = myLoss;
  hits[threadIdx.x] = myHits;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && rows > 0) {
    *lossSum += weight * loss[0] / static_cast<double>(rows);
    *correct += hits[0];
  }
}

__global__ void softmaxBackwardKernel(const float* probabilities, const std::int32_t* labels,
                                      float* grad, std::size_t rows, std::size_t classes,
                                      float scale) {
  const std::size_t count = rows * classes;
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride()) {
    const std::size_t row = i / classes, c = i % classes;
    float g = probabilities[i] * scale;
    if (static_cast<std::size_t>(labels[row]) == c) g -= scale;
    grad[i] = g;
  }
}

__global__ void sgdKernel(float* p, const float* grad, float* buf, std::size_t count, float lr,
                          float mu, float wd, bool nesterov, bool first, const std::int32_t* skip,
                          const float* gradScale) {
  if (skip != nullptr && *skip != 0) return;  // the same for every thread: no divergence
  const float scale = gradScale != nullptr ? *gradScale : 1.0f;
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride()) {
    const float g = grad[i] * scale + wd * p[i];
    if (mu == 0.0f) {
      p[i] -= lr * g;
      continue;
    }
    const float b = first ? g : mu * buf[i] + g;
    buf[i] = b;
    p[i] -= lr * (nesterov ? g + mu * b : b);
  }
}

__global__ void adamwBeginKernel(float* step, float* factors, float lr, float beta1, float beta2,
                                 const std::int32_t* skip) {
  if (skip != nullptr && *skip != 0) return;  // not a step: t and the factors stay
  const float t = *step + 1.0f;
  *step = t;
  factors[0] = static_cast<float>(lr / (1.0 - pow(static_cast<double>(beta1), double{t})));
  factors[1] = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(beta2), double{t})));
}

__global__ void adamwKernel(float* p, const float* grad, float* m, float* v, std::size_t count,
                            float decay, float beta1, float beta2, float eps, const float* factors,
                            const std::int32_t* skip, const float* gradScale) {
  if (skip != nullptr && *skip != 0) return;  // the same for every thread: no divergence
  const float scale = gradScale != nullptr ? *gradScale : 1.0f;
  const float stepSize = factors[0], correction2Sqrt = factors[1];
  const float take1 = static_cast<float>(1.0 - beta1), take2 = static_cast<float>(1.0 - beta2);
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride()) {
    const float g = grad[i] * scale;
    const float mi = m[i] * beta1 + g * take1;
    const float vi = v[i] * beta2 + take2 * g * g;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay + -stepSize * mi / (sqrtf(vi) / correction2Sqrt + eps);
  }
}

__global__ void flagNonFiniteKernel(const float* data, std::size_t count, std::int32_t* flag) {
  bool bad = false;
  for (std::size_t i = ddp::cuda::gridIndex(); i < count; i += ddp::cuda::gridStride())
    bad = bad || !isfinite(data[i]);
  // Every writer stores the same value, so plain stores race harmlessly; one
  // per warp keeps them few.
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % kWarp == 0) *flag = 1;
}

// Adds the kThreads values of `sums` (shared memory) in a fixed tree order;
// the total ends in sums[0]. Every thread of the block must call it.
__device__ void sumBlock(double* sums) {
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
}

// Launched with kNormPartials blocks of kThreads: block b writes the sum of
// the squares it strode over to partials[b].
__global__ void sumSquaresKernel(const float* data, std::size_t count, double* partials) {
  __shared__ double sums[kThreads];
  double mine = 0.0;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < count;
       i += kNormPartials * kThreads) {
    const double v = data[i];
    mine += v * v;
  }
  sums[threadIdx.x] = mine;
  sumBlock(sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// One block of kThreads: thread t adds values t, t + kThreads, ... and the
// block adds the threads' sums in a fixed tree, so the same values in the
// same order give the same bits. The total ends in sums[0].
__device__ void sumValues(const double* values, std::size_t count, double* sums) {
  double mine = 0.0;
  for (std::size_t b = threadIdx.x; b < count; b += kThreads)
    mine += values[b];
  sums[threadIdx.x] = mine;
  sumBlock(sums);
}

// One block of kThreads.
__global__ void sumValuesKernel(const double* values, std::size_t count, double* total) {
  __shared__ double sums[kThreads];
  sumValues(values, count, sums);
  if (threadIdx.x == 0) *total = sums[0];
}

// One block of kThreads: the norm is the square root of the sum of `count`
// sums of squares.
__global__ void clipScaleKernel(const double* squares, std::size_t count, float maxNorm,
                                float* norm, float* scale) {
  __shared__ double sums[kThreads];
  sumValues(squares, count, sums);
  if (threadIdx.x == 0) {
    const float total = static_cast<float>(sqrt(sums[0]));
    *norm = total;
    *scale = clipScale(total, maxNorm);
  }
}

}  // namespace

void fill(float* data, std::size_t count, float value) {
  if (count == 0) return;
  fillKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(data, count, value);
  DDP_CUDA_CHECK_LAUNCH();
}

void broadcastRows(const float* bias, float* y, std::size_t rows, std::size_t cols) {
  if (rows * cols == 0) return;
  broadcastRowsKernel<<<blocksFor(rows * cols), kThreads, 0, ddp::cuda::computeStream()>>>(
      bias, y, rows, cols);
  DDP_CUDA_CHECK_LAUNCH();
}

void reluForward(const float* x, float* y, std::size_t count) {
  if (count == 0) return;
  reluForwardKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(x, y, count);
  DDP_CUDA_CHECK_LAUNCH();
}

void reluBackward(const float* y, const float* dy, float* dx, std::size_t count) {
  if (count == 0) return;
  reluBackwardKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(y, dy, dx,
                                                                                    count);
  DDP_CUDA_CHECK_LAUNCH();
}

void softmaxCrossEntropyForward(const float* logits, const std::int32_t* labels,
                                float* probabilities, double* rowLoss, std::size_t rows,
                                std::size_t classes, double weight, double* lossSum,
                                double* correct) {
  if (rows == 0) return;
  const cudaStream_t stream = ddp::cuda::computeStream();
  const std::size_t threads = rows * kWarp;
  softmaxRowsKernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0,
                      stream>>>(logits, labels, probabilities, rowLoss, rows, classes);
  DDP_CUDA_CHECK_LAUNCH();
  sumRowsKernel<<<1, kThreads, 0, stream>>>(rowLoss, rows, weight, lossSum, correct);
  DDP_CUDA_CHECK_LAUNCH();
}

void softmaxCrossEntropyBackward(const float* probabilities, const std::int32_t* labels,
                                 float* grad, std::size_t rows, std::size_t classes,
                                 float lossScale) {
  if (rows * classes == 0) return;
  const float scale = lossScale / static_cast<float>(rows);
  softmaxBackwardKernel<<<blocksFor(rows * classes), kThreads, 0, ddp::cuda::computeStream()>>>(
      probabilities, labels, grad, rows, classes, scale);
  DDP_CUDA_CHECK_LAUNCH();
}

void sgdUpdate(float* parameter, const float* grad, float* buffer, std::size_t count, float lr,
               float momentum, float weightDecay, bool nesterov, bool first,
               const std::int32_t* skip, const float* gradScale) {
  if (count == 0) return;
  sgdKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(
      parameter, grad, buffer, count, lr, momentum, weightDecay, nesterov, first, skip, gradScale);
  DDP_CUDA_CHECK_LAUNCH();
}

void adamwBeginStep(float* step, float* factors, float lr, float beta1, float beta2,
                    const std::int32_t* skip) {
  adamwBeginKernel<<<1, 1, 0, ddp::cuda::computeStream()>>>(step, factors, lr, beta1, beta2, skip);
  DDP_CUDA_CHECK_LAUNCH();
}

void adamwUpdate(float* parameter, const float* grad, float* expAvg, float* expAvgSq,
                 std::size_t count, float decay, float beta1, float beta2, float eps,
                 const float* factors, const std::int32_t* skip, const float* gradScale) {
  if (count == 0) return;
  adamwKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(
      parameter, grad, expAvg, expAvgSq, count, decay, beta1, beta2, eps, factors, skip, gradScale);
  DDP_CUDA_CHECK_LAUNCH();
}

void clipByNorm(const float* data, std::size_t count, float maxNorm, double* partials, float* norm,
                float* scale) {
  // Launched even for no data, so that *norm and *scale are always written.
  const cudaStream_t stream = ddp::cuda::computeStream();
  sumSquaresKernel<<<kNormPartials, kThreads, 0, stream>>>(data, count, partials);
  DDP_CUDA_CHECK_LAUNCH();
  clipScaleKernel<<<1, kThreads, 0, stream>>>(partials, kNormPartials, maxNorm, norm, scale);
  DDP_CUDA_CHECK_LAUNCH();
}

void sumOfSquares(const float* data, std::size_t count, double* partials, double* total) {
  // Launched even for no data, so that *total is always written.
  const cudaStream_t stream = ddp::cuda::computeStream();
  sumSquaresKernel<<<kNormPartials, kThreads, 0, stream>>>(data, count, partials);
  DDP_CUDA_CHECK_LAUNCH();
  sumValuesKernel<<<1, kThreads, 0, stream>>>(partials, kNormPartials, total);
  DDP_CUDA_CHECK_LAUNCH();
}

void clipByNormOfParts(const double* squares, std::size_t parts, float maxNorm, float* norm,
                       float* scale) {
  clipScaleKernel<<<1, kThreads, 0, ddp::cuda::computeStream()>>>(squares, parts, maxNorm, norm,
                                                                  scale);
  DDP_CUDA_CHECK_LAUNCH();
}

void flagNonFinite(const float* data, std::size_t count, std::int32_t* flag) {
  if (count == 0) return;
  flagNonFiniteKernel<<<blocksFor(count), kThreads, 0, ddp::cuda::computeStream()>>>(data, count,
                                                                                     flag);
  DDP_CUDA_CHECK_LAUNCH();
}

}  // namespace ddp::trainer::cuda
