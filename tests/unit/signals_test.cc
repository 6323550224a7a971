// Note [Broken pipes]: a socket whose peer has gone makes a write fail with
// EPIPE instead of ending the process; a broken pipe on stdout still ends it
// with SIGPIPE. And SIGHUP as a stop (Note [A closed terminal]). Each case runs in a child process,
// so that the signal's disposition and a death by SIGPIPE stay there.
#include "runtime/signals.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <functional>

namespace ddp {
namespace {

// How a child running `body` ended: its exit code, or 128 + the signal.
int inChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

constexpr int kWriteFailedWithEpipe = 3, kWriteSucceeded = 4, kOtherError = 5;

// Writes to a socket whose peer has closed: the first write may still be
// accepted by the kernel (the peer answers it with a reset), a later one
// fails.
int writeToClosedSocket() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) return kOtherError;
  ::close(ends[1]);
  const char byte = 'x';
  for (int i = 0; i < 2; ++i) {
    if (::write(ends[0], &byte, 1) < 0) return errno == EPIPE ? kWriteFailedWithEpipe : kOtherError;
  }
  return kWriteSucceeded;
}

// stdout becomes a pipe whose reader has gone, as under `ddp_train | head`
// once head has exited.
int writeToBrokenStdout() {
  int ends[2];
  if (::pipe(ends) != 0) return kOtherError;
  ::close(ends[0]);
  if (::dup2(ends[1], 1) != 1) return kOtherError;
  const char line[] = "epoch 1\n";
  return ::write(1, line, sizeof line - 1) < 0 ? kWriteFailedWithEpipe : kWriteSucceeded;
}

TEST(BrokenPipe, WithoutTheHandlerASocketsPeerGoneKillsTheProcess) {
  EXPECT_EQ(inChild([] {
              std::signal(SIGPIPE, SIG_DFL);
              return writeToClosedSocket();
            }),
            128 + SIGPIPE);
}

TEST(BrokenPipe, WithTheHandlerASocketsPeerGoneIsAnErrorOfTheWrite) {
  EXPECT_EQ(inChild([] {
              installBrokenPipeHandler();
              return writeToClosedSocket();
            }),
            kWriteFailedWithEpipe);
}

TEST(BrokenPipe, WithTheHandlerABrokenStdoutStillEndsTheProcess) {
  EXPECT_EQ(inChild([] {
              installBrokenPipeHandler();
              return writeToBrokenStdout();
            }),
            128 + SIGPIPE);
}

TEST(BrokenPipe, ASocketsBrokenPipeIsNotTakenForStdoutsWhenStdoutIsAPipeWithAReader) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  EXPECT_EQ(inChild([&] {
              if (::dup2(ends[1], 1) != 1) return kOtherError;
              installBrokenPipeHandler();
              return writeToClosedSocket();
            }),
            kWriteFailedWithEpipe);
  ::close(ends[0]);
  ::close(ends[1]);
}

// What a child that raised SIGHUP found.
constexpr int kStillRunning = 6, kNoStop = 7;

// Note [A closed terminal]: SIGHUP is a stop like SIGTERM; a second one,
// like a second Ctrl-C, ends the process.
TEST(StopSignals, AHangUpIsAStopAndASecondEndsTheProcess) {
  EXPECT_EQ(inChild([] {
              std::signal(SIGHUP, SIG_DFL);
              installStopHandlers();
              std::raise(SIGHUP);
              if (stopSignal() != SIGHUP) return kNoStop;
              std::raise(SIGHUP);
              return kStillRunning;  // not reached
            }),
            128 + SIGHUP);
}

// Under nohup SIGHUP is ignored when ddp_train starts: it stays ignored.
TEST(StopSignals, AnIgnoredHangUpStaysIgnored) {
  EXPECT_EQ(inChild([] {
              std::signal(SIGHUP, SIG_IGN);
              installStopHandlers();
              std::raise(SIGHUP);
              return stopSignal() == 0 ? kStillRunning : kNoStop;
            }),
            kStillRunning);
}

}  // namespace
}  // namespace ddp
