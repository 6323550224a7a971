// Fuzz target: ddp_train's command line and DDP_* environment, one item per
// line of the input (at most 16 arguments): a line `DDP_NAME=VALUE` sets that
// variable for this input, any other line is an argument. Through
// parseOptions and what the launcher derives from the options before
// training (sizes, warnings, the checks every rank makes). Only a UsageError
// or DataError may come out: no hang (the Boost hang of Note [Placeholders
// in po's messages] was found this way), no other exception, no undefined
// behaviour in the size arithmetic.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "launcher/options.h"
#include "launcher/run_config.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddp::launcher;
  std::vector<std::string> args{"ddp_train"}, variables;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (std::size_t begin = 0;;) {
    const std::size_t end = text.find('\n', begin);
    const std::string line = text.substr(begin, end - begin);
    const std::size_t equals = line.find('=');
    if (line.starts_with("DDP_") && equals != std::string::npos &&
        line.find('\0') == std::string::npos) {
      variables.push_back(line.substr(0, equals));
      setenv(variables.back().c_str(), line.c_str() + equals + 1, 1);
    } else {
      args.push_back(line);
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  struct Unset {
    const std::vector<std::string>& names;
    ~Unset() {
      for (const auto& name : names)
        unsetenv(name.c_str());
    }
  } unset{variables};
  if (args.size() > 17) return 0;
  std::vector<const char*> argv;
  for (const auto& arg : args)
    argv.push_back(arg.c_str());
  try {
    Options o = parseOptions(static_cast<int>(argv.size()), argv.data());
    if (o.help || o.version) return 0;
    (void)applyGlobalBatch(o, 3);
    (void)countParameters(o);
    (void)optimizerStateBytes(o);
    (void)optimizerStateBytesPerRank(o, 3);
    (void)syntheticTestSamples(o);
    (void)trainOptionsFrom(o);
    (void)checkpointOptions(o);
    (void)resumeOptions(o);
    (void)describeGlobalBatch(o, 3);
    (void)batchWarning(o, 60000, 4);
    (void)warmupWarning(o, 1000);
    checkEveryRankTrains(o, 60000, 4);
  } catch (const ddp::UsageError&) {
  } catch (const ddp::DataError&) {
  }
  return 0;
}
