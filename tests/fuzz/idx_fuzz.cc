// Fuzz target: readIdxFile (Fashion-MNIST's files, plain or gzip) on any
// bytes, read as a file of one and of three dimensions. The file is an
// in-memory one (memfd), named through /proc/self/fd. What it accepts holds
// exactly the elements its dimensions declare.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "memory_file.h"
#include "runtime/error.h"
#include "trainer/idx_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = ddp::fuzz::asMemoryFile(data, size);
  for (const std::size_t dims : {1, 3}) {
    try {
      const ddp::trainer::IdxArray array = ddp::trainer::readIdxFile(path, dims);
      std::uint64_t elements = 1;
      for (const std::uint32_t d : array.dims)
        elements *= d;
      if (array.dims.size() != dims || array.data.size() != elements) std::abort();
    } catch (const ddp::DataError&) {
    }
  }
  return 0;
}
