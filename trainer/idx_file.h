// Reader for the IDX format of (Fashion-)MNIST, plain or gzip-compressed.
//
// IDX: a big-endian magic 0x0000TTDD (TT = element type, 0x08 for unsigned
// bytes; DD = number of dimensions), DD big-endian uint32 sizes, then the
// elements. Every check failure is a DataError naming the file and what is
// wrong with it; a file is never partially accepted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::trainer {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // row-major, product(dims) bytes
};

// Reads an unsigned-byte IDX file with `expectedDims` dimensions. zlib reads
// plain and .gz files alike. Throws DataError.
IdxArray readIdxFile(const std::string& path, std::size_t expectedDims);

}  // namespace ddp::trainer
