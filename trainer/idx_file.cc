#include "trainer/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "runtime/error.h"
#include "runtime/heartbeat.h"
#include "runtime/str.h"

namespace ddp::trainer {
namespace {

constexpr std::uint8_t kUnsignedByte = 0x08;
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 32;  // 4 GiB: no real IDX file is larger

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

std::uint32_t bigEndian(const unsigned char* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
         (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
}

// Reads bytes [from, to) of the part of the file called `what`, whose size
// is `whole`, to `base + from`, or explains why not.
void readRange(gzFile file, const std::string& path, unsigned char* base, std::size_t from,
               std::size_t to, std::uint64_t whole, const char* what) {
  std::size_t done = from;
  while (done < to) {
    // Chunks of 4 MiB, each a heartbeat (Note [Heartbeats of local work]).
    const auto chunk = static_cast<unsigned>(std::min<std::size_t>(to - done, 4u << 20));
    const int got = gzread(file, base + done, chunk);
    if (got < 0) {
      int code = 0;
      throw DataError(str(path, ": corrupt compressed data while reading ", what, " (",
                          gzerror(file, &code), ")"));
    }
    if (got == 0) {
      throw DataError(
          str(path, ": truncated: ", what, " needs ", whole, " bytes, file ends after ", done));
    }
    done += static_cast<std::size_t>(got);
    heartbeat();
  }
}

void readExactly(gzFile file, const std::string& path, unsigned char* into, std::size_t size,
                 const char* what) {
  readRange(file, path, into, 0, size, size, what);
}

// The `elements` bytes after the header. The buffer follows the file, not
// the header: it starts at what the file can plausibly hold (Fashion-MNIST's
// images compress 1.8:1, so 8 times the file's size takes them in one piece,
// as before) and doubles only as bytes keep arriving. A damaged header that
// declares up to 4 GiB over a short file costs a "truncated" error, not
// 4 GiB zeroed on every rank of the node first.
std::vector<std::uint8_t> readData(gzFile file, const std::string& path, std::uint64_t elements,
                                   std::uint64_t fileBytes) {
  constexpr std::uint64_t kLeastPiece = 64u << 10;
  std::vector<std::uint8_t> data;
  std::uint64_t done = 0, piece = std::max(kLeastPiece, 8 * fileBytes);
  while (done < elements) {
    const auto to = static_cast<std::size_t>(done + std::min(elements - done, piece));
    data.resize(to);
    readRange(file, path, data.data(), static_cast<std::size_t>(done), to, elements, "the data");
    done = to;
    piece = done;
  }
  return data;
}

}  // namespace

IdxArray readIdxFile(const std::string& path, std::size_t expectedDims) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(str(path, ": cannot open (", std::strerror(errno), ")"));
  gzbuffer(file.get(), 1 << 20);

  unsigned char magic[4];
  readExactly(file.get(), path, magic, 4, "the magic number");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUnsignedByte || magic[3] != expectedDims) {
    throw DataError(str(path, ": bad magic number 0x", std::hex, bigEndian(magic), std::dec,
                        ": expected 0x00000", static_cast<int>(kUnsignedByte), "0", expectedDims,
                        " (unsigned bytes, ", expectedDims, " dimensions); is this an IDX file?"));
  }
  IdxArray array;
  std::uint64_t elements = 1;
  for (std::size_t d = 0; d < expectedDims; ++d) {
    unsigned char size[4];
    readExactly(file.get(), path, size, 4, "the header");
    array.dims.push_back(bigEndian(size));
    elements *= array.dims.back();
    if (elements > kMaxElements)
      throw DataError(str(path, ": header declares an implausible size"));
  }
  std::error_code unknown;  // a pipe or such: the least piece first
  const std::uintmax_t fileBytes = std::filesystem::file_size(path, unknown);
  array.data = readData(file.get(), path, elements, unknown ? 0 : fileBytes);
  unsigned char extra;
  if (gzread(file.get(), &extra, 1) > 0) {
    throw DataError(str(path, ": has data past the ", elements, " elements its header declares"));
  }
  return array;
}

}  // namespace ddp::trainer
