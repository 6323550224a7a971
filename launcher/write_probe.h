// A write timed at start-up, for --time-limit's reserve before the run has
// written a checkpoint.
//
// Note [The first write's time]
// --time-limit keeps time for the stop's own writes, as long as the longest
// checkpoint so far took (Note [Stopping before a time limit] in
// launcher/time_limit.h). Before the first checkpoint there was no such
// time, and nothing was kept: a job whose limit came before its first
// checkpoint (an epoch longer than the job, a resumed job of a chain, whose
// process has timed nothing yet) wrote that checkpoint after the limit,
// where the scheduler kills it and every step of the job is lost. So rank 0
// times one write at start-up through the checkpoint's own writer
// (trainer::SafetensorsWriter: checksums, fsync, rename, the directory's
// fsync): a file in the checkpoint directory (else --save-model's) of as
// many bytes as a checkpoint, up to kWriteProbeBytes, of random floats
// (no more compressible than weights, for a compressing file system),
// removed afterwards. Until a checkpoint has been timed, the reserve takes a
// checkpoint, and --save-model's weights, to write at a quarter of that
// rate.
// Checkpoints staged in a copy (--checkpoint-staging) allocate that copy at
// the first one, whose fresh pages can cost more than the write (12-19 us
// per 4 KiB page on these VMs): rank 0 times zeroing as many fresh bytes
// too, and adds it to that first checkpoint. Why a quarter of the rate
// (kWriteProbeMargin): alone (benchmarks/write_probe_bench) a checkpoint
// took 1.34x to 1.41x its prediction at the probe's own rate (medians;
// single writes up to 2.1x), and --save-model's weights 0.80x to 1.27x (up
// to 3.2x right after a large checkpoint); inside a run at np=2 on two
// cores, the stop's writes (the replica check, the checkpoint, the
// weights) took 3.7x to 4.2x, and a 64 MiB probe's own time varied 2x
// from run to run. The probe does not err long by itself. It runs only with --time-limit and a file
// to write, before the first step: 0.03 s for the default MLP, 0.1 s for the large MLP's 64 MiB
// here (benchmarks/RESULTS.md, "--time-limit before the first checkpoint").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddp::launcher {

// The most a probe writes (Note [The first write's time]).
inline constexpr std::uint64_t kWriteProbeBytes = std::uint64_t{64} << 20;
// How many times the probe's time per byte a file is taken to need (Note
// [The first write's time]).
inline constexpr double kWriteProbeMargin = 4.0;

struct WriteTime {
  std::uint64_t bytes = 0;
  double seconds = 0.0;
  // Seconds to write `n` bytes: kWriteProbeMargin times as long as at the
  // probe's rate, and never less than kWriteProbeMargin times the probe.
  double secondsFor(std::uint64_t n) const;
};

// Rank 0, at start-up: writes min(bytes, kWriteProbeBytes) bytes (whole
// 4 MiB tensors, at least one) to a temporary file in `dir` as a checkpoint
// is written (trainer::SafetensorsWriter: checksums, fsync, rename, the
// directory's fsync), times it and removes the file. nullopt, with nothing
// left behind, when any step fails (the directory's own errors come from
// the checks that own it); `whyNot` then says what failed.
std::optional<WriteTime> timeWrite(const std::string& dir, std::uint64_t bytes,
                                   std::string* whyNot = nullptr);

// Rank 0, at start-up: allocates min(bytes, kWriteProbeBytes) bytes of
// fresh memory, zeroed as a checkpoint's copy is, and times it; nullopt
// when there is no room for it.
std::optional<WriteTime> timeFreshMemory(std::uint64_t bytes);

}  // namespace ddp::launcher
