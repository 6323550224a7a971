// LineWriter on a pipe whose reader is the test: lines go out at once while
// it reads, are kept (not waited for) while it does not, and come out whole
// and in order when it reads again (Note [Output that is not read]).
#include "runtime/line_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <future>
#include <string>
#include <vector>

#include "runtime/str.h"

namespace ddp {
namespace {

using namespace std::chrono_literals;
using Importance = LineWriter::Importance;

// A pipe of one page, so that a few lines fill it.
class Pipe {
 public:
  Pipe() {
    EXPECT_EQ(::pipe(fds_), 0);
    EXPECT_GT(::fcntl(fds_[1], F_SETPIPE_SZ, 4096), 0);
  }
  ~Pipe() {
    closeReader();
    ::close(fds_[1]);
  }
  int writer() const { return fds_[1]; }
  void closeReader() {
    if (fds_[0] >= 0) ::close(fds_[0]);
    fds_[0] = -1;
  }
  // Everything in the pipe now, without waiting.
  std::string readNow() {
    std::string out;
    char buffer[8192];
    for (;;) {
      pollfd ready{fds_[0], POLLIN, 0};
      if (::poll(&ready, 1, 0) <= 0) return out;
      const ssize_t n = ::read(fds_[0], buffer, sizeof buffer);
      if (n <= 0) return out;
      out.append(buffer, static_cast<std::size_t>(n));
    }
  }
  // Reads until `writer` has drained, then what is left.
  std::string readAll(const LineWriter& writer) {
    std::string out;
    auto drained = std::async(std::launch::async, [&writer] { return writer.drain(10s); });
    while (drained.wait_for(1ms) != std::future_status::ready)
      out += readNow();
    EXPECT_TRUE(drained.get());
    return out + readNow();
  }

 private:
  int fds_[2] = {-1, -1};
};

std::string numbered(int i, std::size_t width = 100) {
  std::string line = str("line ", i, " ");
  line.resize(width - 1, 'x');
  return line + '\n';
}

// Writes `count` lines of 100 bytes; fails (instead of hanging the test) if
// the calls wait for the reader.
void writeWithoutWaiting(LineWriter& writer, int count, Importance importance, int first = 0) {
  auto done = std::async(std::launch::async, [&] {
    for (int i = first; i < first + count; ++i)
      writer.write(numbered(i), importance);
  });
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready)
      << "write() waited for a reader that does not read";
}

TEST(LineWriter, WritesAtOnceWhileTheReaderKeepsUp) {
  Pipe pipe;
  LineWriter writer(pipe.writer(), {});
  for (int i = 0; i < 20; ++i) {
    writer.write(numbered(i), Importance::kMessage);
    EXPECT_EQ(pipe.readNow(), numbered(i)) << "line " << i << " was not written by the call";
  }
  EXPECT_TRUE(writer.drain(0ms));
}

TEST(LineWriter, KeepsLinesNobodyReadsAndWritesThemInOrderLater) {
  Pipe pipe;
  LineWriter writer(pipe.writer(), {});
  constexpr int kLines = 2000;  // 200 KB, 50 times the pipe
  writeWithoutWaiting(writer, kLines, Importance::kMessage);
  EXPECT_FALSE(writer.drain(100ms)) << "nobody read, yet everything was written";
  std::string expected;
  for (int i = 0; i < kLines; ++i)
    expected += numbered(i);
  EXPECT_EQ(pipe.readAll(writer), expected);
  EXPECT_EQ(writer.droppedSoFar().lines, 0u);
  // Once read, the next line goes out at once again.
  writer.write(numbered(kLines), Importance::kMessage);
  EXPECT_EQ(pipe.readNow(), numbered(kLines));
}

TEST(LineWriter, KeepsOrderAcrossThreads) {
  Pipe pipe;
  LineWriter writer(pipe.writer(), {});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::vector<std::future<void>> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.push_back(std::async(std::launch::async, [&writer, t] {
      for (int i = 0; i < kPerThread; ++i)
        writer.write(numbered(t * kPerThread + i), Importance::kMessage);
    }));
  for (auto& t : threads)
    ASSERT_EQ(t.wait_for(20s), std::future_status::ready);
  const std::string out = pipe.readAll(writer);
  // Every line whole, and each thread's lines in the order it wrote them.
  ASSERT_EQ(out.size(), std::size_t{kThreads * kPerThread * 100});
  std::vector<int> next(kThreads, 0);
  for (std::size_t at = 0; at < out.size(); at += 100) {
    const std::string line = out.substr(at, 100);
    const int i = std::stoi(line.substr(5));
    ASSERT_EQ(line, numbered(i));
    const int t = i / kPerThread;
    EXPECT_EQ(i % kPerThread, next[t]++) << "thread " << t << "'s lines out of order";
  }
}

TEST(LineWriter, DropsProgressPastItsLimitAndSaysHowManyOnceRead) {
  Pipe pipe;
  LineWriter::Options options;
  options.progressLimitBytes = 10'000;
  options.limitBytes = 30'000;
  options.describeDropped = [](const LineWriter::Dropped& d) {
    return str("dropped ", d.lines, " lines, ", d.bytes, " bytes\n");
  };
  LineWriter writer(pipe.writer(), options);
  constexpr int kProgress = 1000;  // 100 KB of progress
  writeWithoutWaiting(writer, kProgress, Importance::kProgress);
  // Messages still fit below limitBytes: none of them is dropped.
  constexpr int kMessages = 100;
  writeWithoutWaiting(writer, kMessages, Importance::kMessage, kProgress);
  const LineWriter::Dropped dropped = writer.droppedSoFar();
  const std::string out = pipe.readAll(writer);

  // Nobody read: what was kept is what the pipe and the limit held, so most
  // of the progress was dropped.
  EXPECT_GT(dropped.lines, std::size_t{kProgress / 2});
  EXPECT_EQ(dropped.bytes, dropped.lines * 100);
  const std::string notice = str("dropped ", dropped.lines, " lines, ", dropped.bytes, " bytes\n");
  ASSERT_GE(out.size(), notice.size());
  EXPECT_EQ(out.substr(out.size() - notice.size()), notice) << "the drops are told last";
  // What was printed is whole lines in order, every message among them.
  const std::string lines = out.substr(0, out.size() - notice.size());
  ASSERT_EQ(lines.size() % 100, 0u);
  int previous = -1;
  int progress = 0;
  int messages = 0;
  for (std::size_t at = 0; at < lines.size(); at += 100) {
    const int i = std::stoi(lines.substr(at + 5));
    EXPECT_EQ(lines.substr(at, 100), numbered(i));
    EXPECT_GT(i, previous);
    previous = i;
    (i < kProgress ? progress : messages) += 1;
  }
  EXPECT_EQ(messages, kMessages);
  EXPECT_EQ(static_cast<std::size_t>(progress) + dropped.lines, std::size_t{kProgress});
}

TEST(LineWriter, DropsEvenMessagesPastTheLimit) {
  Pipe pipe;
  LineWriter::Options options;
  options.progressLimitBytes = 1'000;
  options.limitBytes = 20'000;
  LineWriter writer(pipe.writer(), options);
  writeWithoutWaiting(writer, 1000, Importance::kMessage);
  EXPECT_GT(writer.droppedSoFar().lines, 500u);
  const std::string out = pipe.readAll(writer);
  EXPECT_NE(out.find(" lines ("), std::string::npos) << "no line tells of the drops";
  EXPECT_LT(out.size(), std::size_t{20'000 + 8192 + 200});
}

TEST(LineWriter, DrainGivesUpOnlyWhenNothingIsTaken) {
  Pipe pipe;
  LineWriter writer(pipe.writer(), {});
  writeWithoutWaiting(writer, 300, Importance::kMessage);  // 30 KB
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(writer.drain(200ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  // A reader that takes a page every 50 ms keeps a drain with a 200 ms limit
  // waiting until the end.
  std::string out;
  auto drained = std::async(std::launch::async, [&writer] { return writer.drain(200ms); });
  while (drained.wait_for(50ms) != std::future_status::ready)
    out += pipe.readNow();
  EXPECT_TRUE(drained.get());
  out += pipe.readNow();
  EXPECT_EQ(out.size(), 30'000u);
}

TEST(LineWriter, ADescriptorMadeNonBlockingKeepsItsLinesToo) {
  Pipe pipe;
  ASSERT_EQ(::fcntl(pipe.writer(), F_SETFL, ::fcntl(pipe.writer(), F_GETFL) | O_NONBLOCK), 0);
  LineWriter writer(pipe.writer(), {});
  writeWithoutWaiting(writer, 500, Importance::kMessage);
  std::string expected;
  for (int i = 0; i < 500; ++i)
    expected += numbered(i);
  EXPECT_EQ(pipe.readAll(writer), expected);
}

TEST(LineWriter, AStreamWithoutAReaderKeepsNothing) {
  const auto previous = std::signal(SIGPIPE, SIG_IGN);  // EPIPE instead of the signal
  Pipe pipe;
  pipe.closeReader();
  LineWriter writer(pipe.writer(), {});
  writeWithoutWaiting(writer, 100, Importance::kMessage);
  EXPECT_TRUE(writer.drain(0ms)) << "lines kept for a reader that is gone";
  std::signal(SIGPIPE, previous);
}

}  // namespace
}  // namespace ddp
