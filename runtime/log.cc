#include "runtime/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace ddp::log {
namespace {

std::atomic<int> gRank{-1};
std::atomic<bool> gAllRanks{false};
std::mutex gMutex;

void write(std::FILE* stream, const char* level, const std::string& line) {
  const std::string prefix = gRank >= 0 ? str("[r", gRank.load(), "] ") : std::string();
  std::lock_guard lock(gMutex);
  std::fprintf(stream, "%s%s%s\n", prefix.c_str(), level, line.c_str());
  std::fflush(stream);
}

}  // namespace

void setRank(int rank) {
  gRank = rank;
}
void setAllRanks(bool allRanks) {
  gAllRanks = allRanks;
}
int processRank() {
  return gRank;
}
bool printsInfo() {
  return gRank <= 0 || gAllRanks;
}

void info(const std::string& line) {
  if (printsInfo()) write(stdout, "", line);
}
void warn(const std::string& line) {
  write(stderr, "warning: ", line);
}
void error(const std::string& line) {
  write(stderr, "error: ", line);
}

void plain(const std::string& line) {
  std::lock_guard lock(gMutex);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void raw(const std::string& text) {
  if (gRank > 0) return;
  std::lock_guard lock(gMutex);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace ddp::log
