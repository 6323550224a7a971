// describeFailure: what the top-level handlers print for exceptions whose
// own text says too little.
#include "runtime/error.h"

#include <gtest/gtest.h>

#include <new>
#include <system_error>

namespace ddp {
namespace {

TEST(DescribeFailure, AThreadThatCouldNotStartNamesTheLimits) {
  const std::system_error e(std::make_error_code(std::errc::resource_unavailable_try_again));
  const std::string text = describeFailure(e);
  EXPECT_EQ(text.rfind(e.what(), 0), 0u) << text;
  EXPECT_NE(text.find("could not start a thread"), std::string::npos) << text;
  EXPECT_NE(text.find("ulimit -v, ulimit -u"), std::string::npos) << text;
}

TEST(DescribeFailure, BadAllocSaysOutOfMemory) {
  EXPECT_EQ(describeFailure(std::bad_alloc()).rfind("out of memory (std::bad_alloc): ", 0), 0u);
}

TEST(DescribeFailure, OtherErrorsAreTheirOwnText) {
  EXPECT_EQ(describeFailure(DataError("x.idx: truncated")), "x.idx: truncated");
  const std::system_error other(std::make_error_code(std::errc::permission_denied));
  EXPECT_EQ(describeFailure(other), other.what());
}

}  // namespace
}  // namespace ddp
