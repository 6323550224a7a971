// Note [What a peer's failure says]: the text of a PeerFailedError, from
// the failed ranks' messages.
#include "comm/agreement.h"

#include <gtest/gtest.h>

namespace ddp::comm {
namespace {

TEST(PeerFailureText, NamesTheRanksAndWhatTheySaid) {
  EXPECT_EQ(peerFailureText({3}, {"data: train.gz: truncated"}),
            "stopping: rank 3 failed: data: train.gz: truncated");
  EXPECT_EQ(peerFailureText({1, 3}, {"no room on /ckpt", "shard 3 is empty"}),
            "stopping: ranks 1, 3 failed: rank 1: no room on /ckpt; rank 3: shard 3 is empty");
}

TEST(PeerFailureText, SaysAMessageTheyShareOnce) {
  EXPECT_EQ(peerFailureText({1, 2, 3}, {"no such file", "no such file", "no such file"}),
            "stopping: ranks 1, 2, 3 failed: no such file");
}

TEST(PeerFailureText, SaysWhoseMessagesItLeftOut) {
  const std::vector<int> ranks = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(peerFailureText(ranks, {"a", "a", "a", "a"}),
            "stopping: ranks 1, 2, 3, 4, 5, 6 failed: a (told by the first 4; see the others' "
            "messages)");
  EXPECT_EQ(peerFailureText(ranks, {"a", "b", "a", "a"}),
            "stopping: ranks 1, 2, 3, 4, 5, 6 failed: rank 1: a; rank 2: b; rank 3: a; rank 4: a "
            "(told by the first 4; see the others' messages)");
  EXPECT_EQ(peerFailureText({2}, {}), "stopping: rank 2 failed (see its message)");
  EXPECT_EQ(peerFailureText({2, 5}, {}), "stopping: ranks 2, 5 failed (see their messages)");
}

}  // namespace
}  // namespace ddp::comm
