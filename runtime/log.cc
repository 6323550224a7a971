#include "runtime/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "runtime/line_writer.h"

namespace ddp::log {
namespace {

using Importance = LineWriter::Importance;

std::atomic<int> gRank{-1};
std::atomic<bool> gAllRanks{false};

std::string rankPrefix() {
  return gRank >= 0 ? str("[r", gRank.load(), "] ") : std::string();
}

LineWriter::Options writerOptions() {
  LineWriter::Options options;
  options.describeDropped = [](const LineWriter::Dropped& d) {
    return str(rankPrefix(), "warning: log: ", d.lines, " lines (",
               bytesString(static_cast<double>(d.bytes)),
               ") were not printed: this stream was not read for ", fixed(d.unreadSeconds, 1),
               " s, and training went on\n");
  };
  return options;
}

bool sameFile(int a, int b) {
  struct stat sa {};
  struct stat sb {};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// stdout and stderr, each through a LineWriter (Note [Output that is not
// read]); one writer for both when they are the same file (`2>&1`), so that
// their lines keep their order there. Never destroyed: a writer thread may
// outlive main, and the exit handler below waits for it.
struct Streams {
  LineWriter out{STDOUT_FILENO, writerOptions()};
  LineWriter separateErr{STDERR_FILENO, writerOptions()};
  LineWriter* err = sameFile(STDOUT_FILENO, STDERR_FILENO) ? &out : &separateErr;
};

Streams& streams() {
  static Streams* const kStreams = [] {
    auto* s = new Streams;
    std::atexit([] { flush(kNoStallLimit); });
    return s;
  }();
  return *kStreams;
}

void write(LineWriter& stream, Importance importance, const char* level, const std::string& line) {
  stream.write(str(rankPrefix(), level, line, '\n'), importance);
}

}  // namespace

void setRank(int rank) {
  gRank = rank;
}
void setAllRanks(bool allRanks) {
  gAllRanks = allRanks;
}
int processRank() {
  return gRank;
}
bool printsInfo() {
  return gRank <= 0 || gAllRanks;
}

void info(const std::string& line) {
  if (printsInfo()) write(streams().out, Importance::kMessage, "", line);
}
void progress(const std::string& line) {
  if (printsInfo()) write(streams().out, Importance::kProgress, "", line);
}
void warn(const std::string& line) {
  write(*streams().err, Importance::kMessage, "warning: ", line);
}
void error(const std::string& line) {
  write(*streams().err, Importance::kMessage, "error: ", line);
}

void plain(const std::string& line) {
  streams().err->write(str(line, '\n'), Importance::kMessage);
}

void redraw(const std::string& line) {
  if (gRank > 0) return;
  streams().out.write(str("\r\033[K", line), Importance::kProgress);
}

void raw(const std::string& text) {
  if (gRank > 0) return;
  streams().out.write(text, Importance::kMessage);
}

bool flush(std::chrono::milliseconds stallLimit) {
  Streams& s = streams();
  const bool out = s.out.drain(stallLimit);
  return s.err->drain(stallLimit) && out;
}

}  // namespace ddp::log
