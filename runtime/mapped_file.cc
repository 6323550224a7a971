#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/str.h"

namespace ddp {
namespace {

// The mappings the SIGBUS handler can name (Note [Reading files through a
// mapping]). A slot is published by storing `begin` last, and withdrawn by
// clearing it before the unmap, so the handler never reads a path being
// written.
struct NamedMapping {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::size_t> size{0};
  char path[512] = {};
};
NamedMapping gNamed[MappedFile::kNamedMappings];
std::mutex gNamedMutex;  // between threads claiming slots

void writeText(const char* text) {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

void writeNumber(std::uint64_t value) {
  char digits[24];
  int at = sizeof digits - 1;
  digits[at] = '\0';
  do {
    digits[--at] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && at > 0);
  writeText(digits + at);
}

struct sigaction gPrevious {};  // the SIGBUS handler before ours

void onBusError(int signal, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const NamedMapping& named : gNamed) {
    const std::uintptr_t begin = named.begin.load(std::memory_order_acquire);
    if (begin == 0 || at < begin || at - begin >= named.size.load(std::memory_order_relaxed))
      continue;
    writeText("error: rank ");
    writeNumber(static_cast<std::uint64_t>(std::max(log::processRank(), 0)));
    writeText(": ");
    writeText(named.path);
    writeText(" shrank while it was being read (SIGBUS at byte ");
    writeNumber(at - begin);
    writeText(" of the ");
    writeNumber(named.size.load(std::memory_order_relaxed));
    writeText(
        " it had when mapped): another process truncated or rewrote it in place (cp over "
        "it does); replace such a file by renaming a new one over it\n");
    break;
  }
  // Then what the handler before did: Open MPI's (from MPI_Init) prints the
  // stack and re-raises; with none, the default action, which kills the
  // process once this returns (the signal is blocked until then).
  if ((gPrevious.sa_flags & SA_SIGINFO) != 0 && gPrevious.sa_sigaction != nullptr) {
    gPrevious.sa_sigaction(signal, info, context);
    return;
  }
  if (gPrevious.sa_handler != SIG_DFL && gPrevious.sa_handler != SIG_IGN &&
      gPrevious.sa_handler != nullptr) {
    gPrevious.sa_handler(signal);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void installBusErrorHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = onBusError;
    // SA_RESETHAND: a second SIGBUS (inside the handler before) is not ours.
    action.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &gPrevious);  // without it, the bare signal: no worse
  });
}

}  // namespace

MappedFile::MappedFile(char* data, std::size_t size, const std::string& path)
    : data_(data), size_(size) {
  installBusErrorHandler();
  const std::lock_guard<std::mutex> lock(gNamedMutex);
  for (int i = 0; i < kNamedMappings; ++i) {
    NamedMapping& named = gNamed[i];
    if (named.begin.load(std::memory_order_relaxed) != 0) continue;
    const std::size_t length = std::min(path.size(), sizeof named.path - 1);
    std::memcpy(named.path, path.data(), length);
    named.path[length] = '\0';
    named.size.store(size, std::memory_order_relaxed);
    named.begin.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_release);
    slot_ = i;
    return;
  }
}

std::unique_ptr<MappedFile> MappedFile::map(const std::string& path) {
  // O_NONBLOCK: a FIFO would otherwise block here until a writer came.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw DataError(str(path, ": cannot open (", std::strerror(errno), ")"));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw DataError(str(path, ": cannot stat (", std::strerror(error), ")"));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    throw DataError(str(path, ": is a directory, not a file"));
  }
  if (!S_ISREG(info.st_mode) || info.st_size <= 0) {
    ::close(fd);
    return nullptr;
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (data == MAP_FAILED) return nullptr;
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<char*>(data), size, path));
}

MappedFile::~MappedFile() {
  // Withdrawn before the unmap; the slot is free for the next mapping.
  if (slot_ >= 0) gNamed[slot_].begin.store(0, std::memory_order_release);
  ::munmap(data_, size_);
}

bool MappedFile::contains(const void* begin, std::size_t size) const {
  const auto at = reinterpret_cast<std::uintptr_t>(begin);
  const auto start = reinterpret_cast<std::uintptr_t>(data_);
  return at >= start && at - start <= size_ && size <= size_ - (at - start);
}

void MappedFile::release(const void* begin, std::size_t size) const {
  DDP_CHECK(contains(begin, size), "a range released from a mapped file lies outside it");
  const auto at = reinterpret_cast<std::uintptr_t>(begin);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = (at + page - 1) / page * page;
  const std::uintptr_t end = (at + size) / page * page;
  if (end <= first) return;
  // Advice only: a failure leaves the pages resident, which is what not
  // releasing them would have done.
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

}  // namespace ddp
