// Note [Before the watchdog]: a start-up that outlasts the limit ends the
// process with a message naming the phase it was in; one that finishes in
// time (disarmed) does not.
#include "runtime/start_up_deadline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ddp {
namespace {

using std::chrono::milliseconds;

TEST(StartUpDeadline, DisarmedInTimeItDoesNothing) {
  StartUpDeadline deadline(milliseconds(200), "--timeout", 3, "MPI_Init", "waits for every rank");
  deadline.enter("choosing the device", "waits for every rank");
  deadline.disarm();
  std::this_thread::sleep_for(milliseconds(400));  // past the limit: still alive
  SUCCEED();
}

TEST(StartUpDeadline, DestroyedItDoesNothing) {
  { StartUpDeadline deadline(milliseconds(100), "--timeout", 3, "MPI_Init", "x"); }
  std::this_thread::sleep_for(milliseconds(200));
  SUCCEED();
}

TEST(StartUpDeadline, PastTheLimitItEndsTheProcessNamingThePhase) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StartUpDeadline deadline(milliseconds(50), "--timeout", 7, "MPI_Init",
                                 "some rank has not started");
        deadline.enter("creating the communicator", "some rank has not arrived");
        std::this_thread::sleep_for(std::chrono::seconds(10));  // stuck
      },
      ::testing::ExitedWithCode(7),
      "error: on .* \\(rank 0, pid [0-9]+\\): start-up: creating the communicator has not "
      "finished after 0.05 s \\(--timeout\\): some rank has not arrived; ending this rank");
}

}  // namespace
}  // namespace ddp
