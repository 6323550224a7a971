// Lines to a file descriptor that never block their writer for long.
//
// Note [Output that is not read]
// A process blocks in write() once the pipe or terminal behind its stdout is
// full and nobody reads it: a pty holds 19.8 KB on Linux 6.18, a pipe 64 KB.
// mpirun stops reading its ranks' output once it is told to stop (Ctrl-C);
// a terminal can be paused (Ctrl-S); a pipe's reader can hang (`| tee` on a
// stuck file system). A rank that blocked in its log blocked its training
// thread with it: under mpirun's Ctrl-C it never reached the checkpoint of
// its graceful stop and was killed without it, and a rank blocked mid-step
// stalls its peers in their next collective.
//
// So a line is written at once, by the thread that logs it, only while the
// descriptor can take it without waiting (poll() says so, and no earlier
// line is still waiting: the order stays). Otherwise it is kept in memory,
// and a writer thread of this descriptor (started then) writes what is kept
// as fast as the reader takes it. Training goes on meanwhile.
//
// What is kept is bounded: past Options::progressLimitBytes, lines of
// Importance::kProgress (step lines, live redraws) are dropped; past
// Options::limitBytes, every line. Dropped lines are counted, and once the
// reader has taken everything kept, one line says how many were dropped and
// for how long the stream was not read. A reader that never comes back must
// not cost a rank its memory, and step lines are also in --metrics.
//
// Nothing kept is lost that the old blocking write would have printed:
// drain() waits for it. At exit it waits as long as the reader takes, as the
// blocking write did, but after the run's work (the last checkpoint, the
// --metrics end line) is done. Before MPI_Abort it waits only while the
// reader takes something, and 2 s when it takes nothing, so that a job whose
// output nobody reads still ends. A rank killed while lines are kept loses
// them; blocked in write(), it lost them too, with the rest of its work.
//
// Writes that cannot block (a regular file) always go straight out, as
// before; so do all writes while the reader keeps up. The cost is one poll()
// per chunk of a line.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ddp {

namespace detail {
struct LineWriterState;  // line_writer.cc
}

class LineWriter {
 public:
  enum class Importance {
    kProgress,  // may be dropped first: step lines, live redraws
    kMessage,   // warnings, errors, results: dropped only past limitBytes
  };

  struct Dropped {
    std::size_t lines = 0;
    std::size_t bytes = 0;
    double unreadSeconds = 0;  // from the first line kept to the last byte written
  };

  struct Options {
    std::size_t progressLimitBytes = std::size_t{4} << 20;
    std::size_t limitBytes = std::size_t{16} << 20;
    // The line that reports drops, written once what was kept has gone out.
    std::function<std::string(const Dropped&)> describeDropped;
  };

  // Writes to `fd`, which it does not own and never closes.
  LineWriter(int fd, Options options);
  // Does not wait for what is kept: a writer thread still blocked in write()
  // finishes on its own (it owns what it writes). Call drain() first to wait.
  ~LineWriter();
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  // Writes `text` (whole lines, each ending in '\n', or a redraw), in order
  // with every earlier call, from any thread. Returns without waiting for a
  // reader: see Note [Output that is not read].
  void write(std::string_view text, Importance importance);

  // Waits until everything kept has been written, or until no byte has been
  // written for `stallLimit` (never, for milliseconds::max()). Returns whether everything went out.
  // Takes no lock that write() holds, so it may be called from a thread that is ending the process
  // while another one holds any lock.
  bool drain(std::chrono::milliseconds stallLimit) const;

  // Every line dropped so far (a report of drops resets nothing here).
  Dropped droppedSoFar() const;

 private:
  std::shared_ptr<detail::LineWriterState> state_;
};

}  // namespace ddp
