// Fuzz target: a --config file (any bytes), read by parseOptions from an
// in-memory file (memfd) named through /proc/self/fd: Boost's config-file
// syntax (sections, comments, `key = value`), the byte-order mark, and every
// option's validation. Only a UsageError may come out (a file that cannot be
// read is a NodeUsageError, one kind of it).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "launcher/options.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = memfd_create("config_fuzz", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const char* argv[] = {"ddp_train", "--config", path.c_str()};
  try {
    (void)ddp::launcher::parseOptions(3, argv);
  } catch (const ddp::UsageError&) {
  }
  return 0;
}
