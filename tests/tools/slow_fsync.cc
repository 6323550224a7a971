// A slow file system for the tests, loaded with LD_PRELOAD: every fsync()
// sleeps SLOW_FSYNC_SECONDS first, then does its work. tests/e2e/time_limit.sh
// uses it to make checkpoints slow to write (Note [The first write's time]).
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <thread>

extern "C" int fsync(int fd) {
  using Fsync = int (*)(int);
  static const auto kReal = reinterpret_cast<Fsync>(dlsym(RTLD_NEXT, "fsync"));
  if (const char* seconds = std::getenv("SLOW_FSYNC_SECONDS")) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(seconds)));
  }
  return kReal(fd);
}
