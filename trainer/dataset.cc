#include "trainer/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

#include "runtime/heartbeat.h"
#include "runtime/parallel_for.h"
#include "runtime/str.h"

namespace ddp::trainer {
namespace {

// zlib's crc32 takes at most 4 GiB per call; chunks of 64 MiB, each a
// heartbeat (Note [Heartbeats of local work]).
uLong crc32Of(uLong crc, const std::uint8_t* bytes, std::size_t size) {
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  for (std::size_t done = 0; done < size; done += kChunk) {
    crc = crc32(crc, bytes + done, static_cast<uInt>(std::min(kChunk, size - done)));
    heartbeat();
  }
  return crc;
}

}  // namespace

void gatherInParallel(const Dataset& dataset, std::span<const std::size_t> indices, float* features,
                      std::int32_t* labels, ParallelFor& threads) {
  const std::size_t dim = dataset.featureDim();
  const std::size_t grain =
      std::max<std::size_t>(1, kGatherFloatsPerPart / std::max<std::size_t>(1, dim));
  threads.run(indices.size(), grain, [&](std::size_t begin, std::size_t end) {
    dataset.gather(indices.subspan(begin, end - begin), features + begin * dim, labels + begin);
  });
}

std::string contentFingerprint(std::size_t samples, std::span<const std::uint8_t> features,
                               std::span<const std::int32_t> labels) {
  uLong crc = crc32Of(crc32(0, nullptr, 0), features.data(), features.size());
  crc = crc32Of(crc, reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size_bytes());
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", crc);
  return str(samples, " samples, crc32 ", hex);
}

}  // namespace ddp::trainer
