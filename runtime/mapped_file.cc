#include "runtime/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/error.h"
#include "runtime/str.h"

namespace ddp {

std::unique_ptr<MappedFile> MappedFile::map(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<char*>(data), size));
}

MappedFile::~MappedFile() {
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
