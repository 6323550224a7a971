// Rank-prefixed logging.
//
// Every line carries the rank that wrote it ("[r1] ..."), so the interleaved
// output of many processes stays readable. By default only rank 0 prints
// info lines (progress, summaries); warnings and errors print on every rank.
// `--log-all-ranks` makes every rank print info lines too.
//
// Thread-safe and in order. A line never waits for a reader of stdout or
// stderr that is not reading: it is kept, and written once the reader is
// back (Note [Output that is not read], runtime/line_writer.h).
#pragma once

#include <chrono>
#include <string>

#include "runtime/str.h"

namespace ddp::log {

// Called once the rank is known (by World, or earlier from launcher env vars).
void setRank(int rank);
// Whether ranks other than 0 print info lines.
void setAllRanks(bool allRanks);

// The rank set by setRank, or -1 before it is known.
int processRank();

// Info on stdout: rank 0 only unless setAllRanks(true).
void info(const std::string& line);
// A progress line (a step's loss), as info(): the first to be dropped when
// stdout has not been read for a long time (4 MiB kept).
void progress(const std::string& line);
// Warning on stderr, every rank.
void warn(const std::string& line);
// Error on stderr, every rank.
void error(const std::string& line);

// A line on stderr as it is, with neither rank nor level: what a program
// says before it knows its rank ("ddp_train: --hidden must be ...").
// Every rank; one write, so that mpirun's own messages about the other ranks
// cannot land inside it, as they did between the parts of an unbuffered
// stream's `<<`s.
void plain(const std::string& line);

// Redraws the live progress line on a terminal with `line` (no prefix, no
// newline). Rank 0 only; dropped as progress() is.
void redraw(const std::string& line);
// Writes `text` to stdout as is (no prefix, no newline): what ends or clears
// the live line, which is never dropped, so that a later line starts on a
// row of its own. Rank 0 only.
void raw(const std::string& text);

// How long a rank that ends the job (MPI_Abort, a start-up deadline) waits
// for a reader that takes nothing of what is kept: the job must end.
inline constexpr std::chrono::milliseconds kAbortStallLimit{2000};
// The exit (an atexit handler) waits for every line kept, however long the
// reader takes: as a blocked write waited, but after the run's work is done.
inline constexpr std::chrono::milliseconds kNoStallLimit = std::chrono::milliseconds::max();

// Waits until every line so far has been written, or until nothing has been
// written for `stallLimit`; returns whether all went out. Takes no lock a
// logging thread holds.
bool flush(std::chrono::milliseconds stallLimit);

// Whether this process prints info lines.
bool printsInfo();

}  // namespace ddp::log
