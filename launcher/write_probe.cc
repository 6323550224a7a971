#include "launcher/write_probe.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "runtime/error.h"
#include "runtime/memory.h"
#include "runtime/str.h"
#include "trainer/random.h"
#include "trainer/safetensors.h"

namespace ddp::launcher {

double WriteTime::secondsFor(std::uint64_t n) const {
  if (bytes == 0) return 0.0;
  return kWriteProbeMargin * seconds *
         std::max(1.0, static_cast<double>(n) / static_cast<double>(bytes));
}

std::optional<WriteTime> timeFreshMemory(std::uint64_t bytes) {
  const std::uint64_t total = std::min(bytes, kWriteProbeBytes);
  if (total == 0) return WriteTime{};
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<void> memory;
  try {
    memory = allocateZeroedHost(static_cast<std::size_t>(total));
  } catch (const OutOfMemoryError&) {
    return std::nullopt;
  }
  // Read back, so that the zeroing cannot be skipped.
  volatile unsigned char sink = static_cast<const unsigned char*>(memory.get())[total / 2];
  (void)sink;
  return WriteTime{total,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

std::optional<WriteTime> timeWrite(const std::string& dir, std::uint64_t bytes,
                                   std::string* whyNot) {
  constexpr std::size_t kChunkFloats = std::size_t{1} << 20;  // 4 MiB
  constexpr std::uint64_t kChunkBytes = kChunkFloats * sizeof(float);
  if (bytes == 0) return std::nullopt;
  // Whole chunks, at least one: a checkpoint's size within 4 MiB.
  const std::uint64_t chunks =
      std::max<std::uint64_t>(1, std::min(bytes, kWriteProbeBytes) / kChunkBytes);
  const std::string path =
      (std::filesystem::path(dir) / str(".ddp_train-write-probe-", ::getpid(), ".safetensors"))
          .string();
  // Random values, as weights are: a compressing file system cannot make
  // the probe faster than a checkpoint.
  std::vector<float> chunk(kChunkFloats);
  trainer::Random random(kChunkFloats);
  for (float& value : chunk)
    value = random.uniform(-1.0f, 1.0f);
  std::vector<trainer::SafetensorsWriter::Entry> entries;
  for (std::uint64_t i = 0; i < chunks; ++i)
    entries.push_back({str("probe.", i), {kChunkFloats}});
  try {
    // As a checkpoint is written: checksums, the data, fsync, rename, the
    // directory's fsync (Note [The first write's time]).
    const auto start = std::chrono::steady_clock::now();
    trainer::SafetensorsWriter writer(path, std::move(entries), {});
    for (std::size_t i = 0; i < writer.size(); ++i)
      writer.write(i, chunk, trainer::SafetensorsWriter::Checksum::kNow);
    writer.commit();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (::unlink(path.c_str()) != 0) {
      if (whyNot) *whyNot = str(path, ": unlink failed (", std::strerror(errno), ")");
      return std::nullopt;
    }
    return WriteTime{chunks * kChunkBytes, seconds};
  } catch (const std::exception& e) {
    if (whyNot) *whyNot = e.what();
    ::unlink(path.c_str());  // committed before a later step failed
    return std::nullopt;
  }
}

}  // namespace ddp::launcher
