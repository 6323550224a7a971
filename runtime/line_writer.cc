#include "runtime/line_writer.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>

#include "runtime/str.h"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// What the logging thread writes per poll(): a pipe that polls writable has a
// free page, which takes a write of PIPE_BUF (4 KiB) whole and at once, so
// that a line that long still reaches a launcher reading the pipe in one
// piece (a pty may take less, and the write then waits while its reader,
// which was keeping up, takes the rest).
constexpr std::size_t kReadyChunkBytes = PIPE_BUF;
// What the writer thread writes per call: a blocking write returns only once
// all of it is taken, and drain() must see a slow reader's progress.
constexpr std::size_t kThreadChunkBytes = 4096;

std::size_t countLines(std::string_view text) {
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')));
}

std::string describeByDefault(const LineWriter::Dropped& d) {
  return str(d.lines, " lines (", bytesString(static_cast<double>(d.bytes)),
             ") were not printed: this stream was not read for ", fixed(d.unreadSeconds, 1),
             " s\n");
}

}  // namespace

namespace detail {

struct LineWriterState {
  int fd = -1;
  // Whether `fd` was a regular file when the writer was made: writes to one
  // never wait for a reader (a disk that hangs cannot be helped here), so
  // they skip the poll(). Descriptors rarely change what they point to.
  bool regularFile = false;
  LineWriter::Options options;

  std::mutex mutex;
  std::condition_variable work;  // the writer thread waits here for kept bytes
  std::string kept;              // bytes waiting for the reader, in order
  bool writing = false;          // the writer thread holds bytes taken from `kept`
  bool threadStarted = false;
  bool stop = false;
  Clock::time_point keptSince;  // when this stretch of keeping began
  LineWriter::Dropped dropped;  // since the last report of drops
  LineWriter::Dropped droppedTotal;

  // Read without the mutex by drain(): bytes kept or held by the writer
  // thread, and bytes the writer thread has written.
  std::atomic<std::size_t> pending{0};
  std::atomic<std::uint64_t> written{0};
};

}  // namespace detail

namespace {

using State = detail::LineWriterState;

enum class Outcome { kAll, kWouldWait, kFailed };

// Writes what `fd` takes now, without waiting (a regular file always takes
// it: no poll). `done` counts what went out.
Outcome writeWhileReady(int fd, bool regularFile, std::string_view text, std::size_t& done) {
  while (done < text.size()) {
    if (regularFile) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EINTR) {
        return Outcome::kFailed;
      }
      continue;
    }
    pollfd ready{fd, POLLOUT, 0};
    const int polled = ::poll(&ready, 1, 0);
    if (polled < 0 && errno == EINTR) continue;
    // An error or hang-up is left to write() to report (EPIPE, EIO), as
    // before: a stdout whose reader is gone still ends the process
    // (Note [Broken pipes]).
    if (polled <= 0 || (ready.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) == 0)
      return Outcome::kWouldWait;
    const std::size_t chunk = std::min(kReadyChunkBytes, text.size() - done);
    const ssize_t n = ::write(fd, text.data() + done, chunk);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return Outcome::kWouldWait;
    } else {
      return Outcome::kFailed;  // lost, as a failed fprintf lost it
    }
  }
  return Outcome::kAll;
}

// Writes all of `batch`, waiting for the reader. Accounts every byte in
// `state.pending` but the last, which the caller settles.
void writeAll(State& state, const std::string& batch) {
  std::size_t done = 0;
  const auto settle = [&state](std::size_t bytes) { state.pending -= bytes; };
  while (done < batch.size()) {
    const std::size_t chunk = std::min(kThreadChunkBytes, batch.size() - done);
    const ssize_t n = ::write(state.fd, batch.data() + done, chunk);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      state.written += static_cast<std::uint64_t>(n);
      settle(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd ready{state.fd, POLLOUT, 0};
      ::poll(&ready, 1, 100);  // a descriptor someone made non-blocking
    } else {
      settle(batch.size() - done);  // a stream that failed: the rest is lost
      return;
    }
  }
}

void runWriter(const std::shared_ptr<State>& state) {
  State& s = *state;
  std::unique_lock lock(s.mutex);
  for (;;) {
    s.work.wait(lock, [&s] { return s.stop || !s.kept.empty(); });
    if (s.kept.empty()) return;
    std::string batch;
    batch.swap(s.kept);
    s.writing = true;
    ++s.pending;  // held until the report of drops, if any, is kept: drain() must wait for it
    lock.unlock();
    writeAll(s, batch);
    lock.lock();
    s.writing = false;
    if (s.kept.empty() && s.dropped.lines > 0) {
      s.dropped.unreadSeconds = std::chrono::duration<double>(Clock::now() - s.keptSince).count();
      const auto& describe =
          s.options.describeDropped ? s.options.describeDropped : describeByDefault;
      s.kept = describe(s.dropped);
      s.pending += s.kept.size();
      s.dropped = {};
    }
    --s.pending;
  }
}

}  // namespace

LineWriter::LineWriter(int fd, Options options) : state_(std::make_shared<State>()) {
  state_->fd = fd;
  struct stat status {};
  state_->regularFile = ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode);
  state_->options = std::move(options);
}

LineWriter::~LineWriter() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->work.notify_one();
  // The thread, if any, owns the state with us; it ends once what is kept is
  // written, and nothing waits for a reader that may never come.
}

void LineWriter::write(std::string_view text, Importance importance) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  if (s.kept.empty() && !s.writing) {
    std::size_t done = 0;
    const Outcome outcome = writeWhileReady(s.fd, s.regularFile, text, done);
    if (outcome != Outcome::kWouldWait) return;
    text.remove_prefix(done);
    s.keptSince = Clock::now();
  }
  const std::size_t limit =
      importance == Importance::kProgress ? s.options.progressLimitBytes : s.options.limitBytes;
  if (s.pending + text.size() > limit) {
    for (Dropped* d : {&s.dropped, &s.droppedTotal}) {
      d->lines += countLines(text);
      d->bytes += text.size();
    }
    return;
  }
  s.kept.append(text);
  s.pending += text.size();
  if (!s.threadStarted) {
    try {
      std::thread(runWriter, state_).detach();
      s.threadStarted = true;
    } catch (const std::system_error&) {
      // No thread to be had: wait for the reader here, as a plain write would.
      std::string batch;
      batch.swap(s.kept);
      ++s.pending;
      writeAll(s, batch);
      --s.pending;
      return;
    }
  }
  lock.unlock();
  s.work.notify_one();
}

bool LineWriter::drain(std::chrono::milliseconds stallLimit) const {
  const State& s = *state_;
  std::uint64_t lastWritten = s.written;
  Clock::time_point lastProgress = Clock::now();
  while (s.pending != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::uint64_t written = s.written;
    const Clock::time_point now = Clock::now();
    if (written != lastWritten) {
      lastWritten = written;
      lastProgress = now;
    } else if (stallLimit != std::chrono::milliseconds::max() &&
               std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress) >=
                   stallLimit) {
      return false;
    }
  }
  return true;
}

LineWriter::Dropped LineWriter::droppedSoFar() const {
  std::lock_guard lock(state_->mutex);
  return state_->droppedTotal;
}

}  // namespace ddp
