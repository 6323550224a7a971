// The keepalive check for mpirun across nodes (Note [Lost nodes under mpirun]).
#include "launcher/launcher_checks.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ddp::launcher {
namespace {

Keepalive fromEnv(const std::map<std::string, std::string>& env) {
  return keepaliveFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Keepalive, OpenMpiDefaultsWhenNothingIsSet) {
  const Keepalive k = fromEnv({});
  EXPECT_EQ(k.time, 300);
  EXPECT_EQ(k.interval, 20);
  EXPECT_EQ(k.probes, 9);
  EXPECT_EQ(k.worstCase(), 480);
}

TEST(Keepalive, ReadsTheMcaVariablesMpirunExports) {
  const Keepalive k = fromEnv({{"OMPI_MCA_oob_tcp_keepalive_time", "6"},
                               {"OMPI_MCA_oob_tcp_keepalive_intvl", "2"},
                               {"OMPI_MCA_oob_tcp_keepalive_probes", "3"}});
  EXPECT_EQ(k.worstCase(), 12);
}

TEST(Keepalive, DefaultsWarnWithTheDefaultTimeoutAndSuggestAWorkingSetting) {
  const auto warning = keepaliveWarning(Keepalive{}, 300, 60);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("up to 480 s (oob_tcp_keepalive_time 300 + 9 probes x 20 s)"),
            std::string::npos)
      << *warning;
  // The suggestion: probes outlast the stall warning, the whole ends before the timeout.
  const Keepalive s = suggestedKeepalive(300, 60);
  EXPECT_GT(s.interval * s.probes, 60 + 2);
  EXPECT_LT(s.worstCase(), 300);
  EXPECT_NE(warning->find("--mca oob_tcp_keepalive_time " + std::to_string(s.time) +
                          " --mca oob_tcp_keepalive_intvl " + std::to_string(s.interval) +
                          " --mca oob_tcp_keepalive_probes " + std::to_string(s.probes)),
            std::string::npos)
      << *warning;
  EXPECT_FALSE(keepaliveWarning(s, 300, 60).has_value());
}

TEST(Keepalive, ASuggestionAlwaysEndsBeforeTheTimeout) {
  for (double timeout : {4.0, 8.0, 20.0, 30.0, 60.0, 300.0, 3600.0}) {
    const Keepalive s = suggestedKeepalive(timeout, timeout / 2);
    EXPECT_LT(s.worstCase(), timeout) << "timeout " << timeout;
    EXPECT_GE(s.time, 1);
    EXPECT_FALSE(keepaliveWarning(s, timeout, timeout / 2).has_value()) << timeout;
  }
}

TEST(Keepalive, KeepaliveOffAlwaysWarns) {
  Keepalive off;
  off.time = 0;
  const auto warning = keepaliveWarning(off, 300, 60);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("keepalive off"), std::string::npos) << *warning;
}

}  // namespace
}  // namespace ddp::launcher
