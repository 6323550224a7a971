// A file mapped into memory, read-only in effect, for reading large files
// (checkpoints, weights) without holding a copy of them.
//
// Note [Reading files through a mapping]
// A file read with read() lands in anonymous memory: a 2 GiB checkpoint is 2
// GiB of the reading rank's resident set until the last tensor is copied out
// of it, beside the model and optimizer it is copied into, and a cgroup
// limit (Slurm's) counts it like any other allocation. Mapped, the file's
// pages are the kernel's page cache: clean, read again from the file if the
// kernel drops them, reclaimable under memory pressure. Once a range has been
// read (checksummed, copied into a tensor, broadcast), release() drops it
// from this process's resident set too, so reading a file of any size costs
// the reader a few pages at a time.
//
// The mapping is private (MAP_PRIVATE) and writable, so a caller that writes
// into a view gets a private copy of that page, as with a buffer it owns;
// release() must then not cover that page, or the write is lost (the page is
// read again from the file). The readers here never write into a file's
// views. Being private and writable, the mapping counts against a process's
// address space and data segment (`ulimit -v`, `ulimit -d`) like a buffer
// would; the start-up memory check counts it there (launcher/memory_check.h).
//
// A mapped file must not shrink while mapped: touching a page past its new
// end raises SIGBUS. ddp's own writers never change a file in place (a
// temporary file renamed over it: Note [Checksums in safetensors files] in
// trainer/safetensors.h), and deleting or renaming a mapped file is safe, but
// `cp` over a checkpoint truncates it first. The process dies of the signal,
// as before; a handler (installed with the first mapping) first names the
// file on stderr, since the bare "Bus error" mpirun reports says nothing of
// a file. It writes only for an address inside one of the mappings alive
// (at most kNamedMappings of them are named), with async-signal-safe calls.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace ddp {

class MappedFile {
 public:
  static constexpr int kNamedMappings = 16;

  // Maps the whole of `path`, or returns null when it cannot be mapped but
  // may still be readable another way: not a regular file (a pipe, a
  // device), empty, or a file system that refuses mmap. Throws DataError
  // naming `path` when it cannot be opened or is a directory.
  static std::unique_ptr<MappedFile> map(const std::string& path);

  ~MappedFile();  // unmaps; never throws
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // The file's bytes, valid while this object lives.
  std::span<char> bytes() const { return {data_, size_}; }
  // Whether [begin, begin + size) lies in bytes().
  bool contains(const void* begin, std::size_t size) const;

  // Drops the pages lying wholly inside [begin, begin + size) from this
  // process's resident set (madvise MADV_DONTNEED); touching them again
  // reads them from the file (usually from the page cache). Pages only
  // partly inside are kept, so a neighbouring range is never affected.
  // The range must lie in bytes() (InternalError otherwise). Any thread;
  // costs a system call.
  void release(const void* begin, std::size_t size) const;

 private:
  MappedFile(char* data, std::size_t size, const std::string& path);
  char* data_;
  std::size_t size_;
  int slot_ = -1;  // where the SIGBUS handler finds the path, or -1
};

}  // namespace ddp
