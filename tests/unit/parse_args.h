// ddp_train's options from a command line written as a list, for tests.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace ddp::testing {

inline launcher::Options parseArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "ddp_train");
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  return launcher::parseOptions(static_cast<int>(argv.size()), argv.data());
}

}  // namespace ddp::testing
