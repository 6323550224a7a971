#include "trainer/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
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

// Reads exactly `size` bytes or explains why not.
void readExactly(gzFile file, const std::string& path, void* into, std::size_t size,
                 const char* what) {
  std::size_t done = 0;
  auto* out = static_cast<unsigned char*>(into);
  while (done < size) {
    // Chunks of 4 MiB, each a heartbeat (Note [Heartbeats of local work]).
    const auto chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, 4u << 20));
    const int got = gzread(file, out + done, chunk);
    if (got < 0) {
      int code = 0;
      throw DataError(str(path, ": corrupt compressed data while reading ", what, " (",
                          gzerror(file, &code), ")"));
    }
    if (got == 0) {
      throw DataError(
          str(path, ": truncated: ", what, " needs ", size, " bytes, file ends after ", done));
    }
    done += static_cast<std::size_t>(got);
    heartbeat();
  }
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
  array.data.resize(elements);
  readExactly(file.get(), path, array.data.data(), elements, "the data");
  unsigned char extra;
  if (gzread(file.get(), &extra, 1) > 0) {
    throw DataError(str(path, ": has data past the ", elements, " elements its header declares"));
  }
  return array;
}

}  // namespace ddp::trainer
