// line_writer_bench: what a log line costs the thread that logs it, through
// LineWriter (Note [Output that is not read]) against the blocking
// fprintf + fflush the log used before, on the same descriptor: /dev/null, a
// regular file, a pipe a reader thread keeps up with, and (LineWriter only)
// a pipe nobody reads, where the lines are kept. Lines of 150 bytes; median
// of 7 rounds of the per-line time.
//
//   build/benchmarks/line_writer_bench [lines-per-round] [dir-for-the-file]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/command_line.h"
#include "runtime/line_writer.h"

namespace {

using Clock = std::chrono::steady_clock;
using ddp::LineWriter;

constexpr int kRounds = 7;

std::string line(int i) {
  std::string text = "[r0] epoch 1/8  step " + std::to_string(i) + "/4096  loss 0.1234  lr 0.01 ";
  text.resize(149, '.');
  return text + '\n';
}

// Median over rounds of the ns per line that `writeLines` takes for `lines`.
double medianNsPerLine(int lines, const std::function<void(int)>& writeLines) {
  std::vector<double> ns;
  for (int r = 0; r < kRounds; ++r) {
    const auto start = Clock::now();
    writeLines(lines);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / lines);
  }
  std::nth_element(ns.begin(), ns.begin() + kRounds / 2, ns.end());
  return ns[kRounds / 2];
}

// The old way: one fprintf and one fflush per line, blocking.
double blockingStdio(int fd, int lines) {
  std::FILE* file = ::fdopen(::dup(fd), "w");
  const double ns = medianNsPerLine(lines, [file](int n) {
    for (int i = 0; i < n; ++i) {
      std::fprintf(file, "%s", line(i).c_str());
      std::fflush(file);
    }
  });
  std::fclose(file);
  return ns;
}

double lineWriter(int fd, int lines) {
  LineWriter writer(fd, {});
  const double ns = medianNsPerLine(lines, [&writer](int n) {
    for (int i = 0; i < n; ++i)
      writer.write(line(i), LineWriter::Importance::kProgress);
  });
  writer.drain(std::chrono::seconds(60));
  return ns;
}

// A pipe whose reader thread takes everything as it comes.
struct ReadPipe {
  int fds[2] = {-1, -1};
  std::atomic<bool> done{false};
  std::thread reader;
  ReadPipe() {
    if (::pipe(fds) != 0) std::abort();
    reader = std::thread([this] {
      char buffer[65536];
      while (::read(fds[0], buffer, sizeof buffer) > 0) {
      }
    });
  }
  ~ReadPipe() {
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
  }
};

void row(const char* target, double old, double ours) {
  std::printf("%-28s %14.0f %14.0f %8.2f\n", target, old, ours, ours / old);
}

constexpr ddp::bench::ToolText kText{
    "line_writer_bench", "usage: line_writer_bench [LINES [DIR]]\n",
    "What a log line of 150 bytes costs the thread that logs it, through LineWriter\n"
    "against a blocking fprintf and fflush, on /dev/null, a file in DIR (default: /tmp),\n"
    "a pipe that is read and one nobody reads. LINES lines a round (default: 20000);\n"
    "the median of 7 rounds, in ns a line.\n"};

int run(const std::vector<std::string>& args) {
  ddp::bench::checkPositional(args, 2);
  const int lines = ddp::bench::countArgument(args, 0, 1, 20000, "LINES");
  const std::string dir = ddp::bench::directoryArgument(args, 1, "/tmp");
  std::printf("# line_writer_bench: %d lines of 150 bytes per round, median of %d rounds\n", lines,
              kRounds);
  std::printf("%-28s %14s %14s %8s\n", "target", "fprintf(ns)", "LineWriter(ns)", "ratio");

  const int null = ::open("/dev/null", O_WRONLY);
  row("/dev/null", blockingStdio(null, lines), lineWriter(null, lines));
  ::close(null);

  const std::string path = dir + "/line_writer_bench.out";
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  row(("file in " + dir).c_str(), blockingStdio(file, lines), lineWriter(file, lines));
  ::close(file);
  ::unlink(path.c_str());

  {
    ReadPipe a;
    const double old = blockingStdio(a.fds[1], lines);
    ReadPipe b;
    row("pipe, read", old, lineWriter(b.fds[1], lines));
  }

  // Nobody reads during the rounds: every line past the pipe's 64 KB is kept
  // (4 MiB of progress at most; past it they are dropped, which is cheaper).
  int unread[2];
  if (::pipe(unread) != 0) return 1;
  LineWriter writer(unread[1], {});
  const int keptLines = std::min(lines, 3000);  // 7 rounds within 4 MiB
  const double kept = medianNsPerLine(keptLines, [&writer](int n) {
    for (int i = 0; i < n; ++i)
      writer.write(line(i), LineWriter::Importance::kProgress);
  });
  std::printf("%-28s %14s %14.0f %8s   (fprintf would wait for a reader)\n", "pipe, unread: kept",
              "-", kept, "-");
  std::thread drainer([&unread] {
    char buffer[65536];
    while (::read(unread[0], buffer, sizeof buffer) > 0) {
    }
  });
  const bool drained = writer.drain(std::chrono::seconds(60));
  ::close(unread[1]);
  drainer.join();
  ::close(unread[0]);
  const auto dropped = writer.droppedSoFar();
  std::printf("# unread pipe: %zu lines dropped, %s\n", dropped.lines,
              drained ? "the rest written once read" : "NOT all written once read");
  return drained && dropped.lines == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ddp::bench::runTool(kText, argc, argv, run);
}
