// Fuzz target: a --config file (any bytes), read by parseOptions from an
// in-memory file (memfd) named through /proc/self/fd: Boost's config-file
// syntax (sections, comments, `key = value`), the byte-order mark, and every
// option's validation. Only a UsageError may come out (a file that cannot be
// read is a NodeUsageError, one kind of it).
#include <cstdint>
#include <string>

#include "launcher/options.h"
#include "memory_file.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ddp::fuzz::asMemoryFile(data, size);
  const char* argv[] = {"ddp_train", "--config", path.c_str()};
  try {
    (void)ddp::launcher::parseOptions(3, argv);
  } catch (const ddp::UsageError&) {
  }
  return 0;
}
