#include "trainer/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "comm/bfloat16.h"
#include "runtime/error.h"
#include "runtime/file_system.h"
#include "runtime/heartbeat.h"
#include "runtime/str.h"
#include "trainer/float_formats.h"

namespace ddp::trainer {
namespace {

// Where saveSafetensors writes before renaming into place.
std::string temporaryPathFor(const std::string& path) {
  return str(path, ".tmp.", ::getpid());
}

using nlohmann::json;
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit
// Note [Checksums in safetensors files]
constexpr std::string_view kTensorCrcPrefix = "ddp.crc32.";
constexpr std::string_view kMetadataCrcKey = "ddp.metadata_crc32";

// Chunks of 64 MiB, each a heartbeat (Note [Heartbeats of local work]).
constexpr std::size_t kHeartbeatBytes = std::size_t{64} << 20;

std::uint32_t crcOf(const void* data, std::size_t bytes) {
  const auto* at = static_cast<const Bytef*>(data);
  uLong crc = crc32_z(0, nullptr, 0);
  for (std::size_t done = 0; done < bytes; done += kHeartbeatBytes) {
    crc = crc32_z(crc, at + done, std::min(kHeartbeatBytes, bytes - done));
    heartbeat();
  }
  return static_cast<std::uint32_t>(crc);
}

std::string hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

// Of every entry but the metadata checksum itself: key NUL value NUL, in key order.
std::uint32_t metadataCrc(const std::map<std::string, std::string>& metadata) {
  uLong crc = crc32_z(0, nullptr, 0);
  for (const auto& [key, value] : metadata) {
    if (key == kMetadataCrcKey) continue;
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(key.c_str()), key.size() + 1);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(value.c_str()), value.size() + 1);
  }
  return static_cast<std::uint32_t>(crc);
}

// Bytes per element of the float dtypes a file may hold (Note [Weights in
// other float types]); 0 for any other dtype.
std::size_t floatBytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

// `count` elements of `dtype` at `data` (any alignment) into float32.
// Throws DataError naming `what` for an F64 value beyond float32's range.
Tensor toFloat32(const std::string& dtype, const char* data, const Shape& shape,
                 const std::string& what) {
  Tensor tensor(shape);
  float* out = tensor.data();
  const std::size_t count = tensor.numel();
  if (dtype == "F64") {
    for (std::size_t i = 0; i < count; ++i) {
      double value;
      std::memcpy(&value, data + 8 * i, 8);
      out[i] = static_cast<float>(value);
      if (std::isfinite(value) && !std::isfinite(out[i])) {
        throw DataError(str(what, " holds ", value, " at index ", i, ", beyond float32's range"));
      }
    }
    return tensor;
  }
  using Convert = float (*)(std::uint16_t);
  const Convert convert = dtype == "F16" ? Convert{fromFloat16} : Convert{comm::fromBFloat16};
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    out[i] = convert(bits);
  }
  return tensor;
}

bool isChecksumKey(const std::string& key) {
  return key.starts_with(kTensorCrcPrefix) || key == kMetadataCrcKey;
}

// Throws DataError unless `file`'s metadata entry `key` is `computed`, the
// checksum of `what` ("its metadata", "tensor 'x'").
void expectCrc(const std::string& path, const SafetensorsFile& file, const std::string& key,
               const std::string& what, std::uint32_t computed) {
  const auto stored = file.metadata.find(key);
  if (stored != file.metadata.end() && stored->second == hex(computed)) return;
  throw DataError(str(path, ": the file is damaged: ", what, " has CRC-32 ", hex(computed),
                      " but the file recorded ",
                      stored == file.metadata.end() ? std::string("none") : stored->second,
                      " (changed or corrupted after it was written)"));
}

// Writes all of `data` at `offset`; false, with errno set, if it cannot.
bool writeAllAt(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n =
        ::pwrite(fd, bytes, std::min(size, kHeartbeatBytes), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    bytes += n;
    offset += static_cast<std::uint64_t>(n);
    size -= static_cast<std::size_t>(n);
    heartbeat();
  }
  return true;
}

// What SafetensorsWriter::commit reads back at a time.
constexpr std::size_t kReadBackBytes = std::size_t{4} << 20;

// "<file>: write failed (No space left on device: the file needs 14.2 MiB
// and 3.0 MiB was free)": on a full disk, how far off it was.
DataError writeError(const std::string& file, const char* what, int error, std::uint64_t size,
                     std::optional<std::uint64_t> freeBefore) {
  const bool full = error == ENOSPC || error == EDQUOT;
  return DataError(
      str(file, ": ", what, " failed (", std::strerror(error),
          full ? str(": the file needs ", bytesString(static_cast<double>(size)),
                     freeBefore ? str(" and ", bytesString(static_cast<double>(*freeBefore)),
                                      " was free when writing began")
                                : std::string())
               : std::string(),
          ")"));
}

void fsyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: the rename itself already happened
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<Entry> entries,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)),
      temporary_(temporaryPathFor(path_)),
      entries_(std::move(entries)),
      metadata_(std::move(metadata)),
      crcs_(entries_.size()),
      written_(entries_.size(), 0) {
  for (const auto& entry : metadata_)
    DDP_CHECK(!isChecksumKey(entry.first), str("saveSafetensors: reserved key ", entry.first));
  // Placeholders as long as the checksums: the header's size, and so every
  // tensor's place, is known now (Note [Writing a file in parts]).
  const std::string headerText = header(std::vector<std::string>(entries_.size(), hex(0)));
  std::uint64_t offset = 8 + headerText.size();
  for (const Entry& entry : entries_) {
    offsets_.push_back(offset);
    offset += numelOf(entry.shape) * sizeof(float);
  }
  fileSize_ = offset;
  fd_ = ::open(temporary_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw DataError(str(path_, ": cannot create (", std::strerror(errno), ")"));
  freeBefore_ = freeBytesOf(fd_);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

// The JSON header with checksums `crcs` (one per entry), padded so the data
// is 8-byte aligned.
std::string SafetensorsWriter::header(const std::vector<std::string>& crcs) const {
  std::map<std::string, std::string> meta = metadata_;
  for (std::size_t i = 0; i < entries_.size(); ++i)
    meta[str(kTensorCrcPrefix, entries_[i].name)] = crcs[i];
  meta[std::string(kMetadataCrcKey)] = hex(metadataCrc(meta));
  json header = json::object();
  header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const Entry& entry : entries_) {
    const std::uint64_t bytes = numelOf(entry.shape) * sizeof(float);
    header[entry.name] = {
        {"dtype", "F32"}, {"shape", entry.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void SafetensorsWriter::fail(const char* what, int error) const {
  throw writeError(temporary_, what, error, fileSize_, freeBefore_);
}

void SafetensorsWriter::write(std::size_t index, std::span<const float> values, Checksum checksum) {
  DDP_CHECK(index < entries_.size() && written_[index] == 0,
            str("SafetensorsWriter::write: entry ", index, " of ", entries_.size(),
                written_.size() > index && written_[index] > 0 ? ", written already" : ""));
  DDP_CHECK(values.size() == numelOf(entries_[index].shape),
            str("SafetensorsWriter::write: ", values.size(), " values for '", entries_[index].name,
                "' of shape ", shapeString(entries_[index].shape)));
  writePart(index, 0, values);
  if (checksum == Checksum::kNow) crcs_[index] = hex(crcOf(values.data(), values.size_bytes()));
}

void SafetensorsWriter::writePart(std::size_t index, std::size_t begin,
                                  std::span<const float> values) {
  DDP_CHECK(index < entries_.size() && fd_ >= 0,
            str("SafetensorsWriter::writePart: entry ", index, " of ", entries_.size()));
  const std::size_t numel = numelOf(entries_[index].shape);
  DDP_CHECK(
      begin + values.size() <= numel && written_[index] + values.size() <= numel,
      str("SafetensorsWriter::writePart: elements [", begin, ", ", begin + values.size(), ") of '",
          entries_[index].name, "' (", numel, ", ", written_[index], " written already)"));
  if (!writeAllAt(fd_, values.data(), values.size_bytes(), offsets_[index] + begin * sizeof(float)))
    fail("write", errno);
  written_[index] += values.size();
}

void SafetensorsWriter::commit() {
  DDP_CHECK(fd_ >= 0 && !committed_, "SafetensorsWriter::commit: committed already");
  std::vector<char> buffer;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    DDP_CHECK(written_[i] == numelOf(entries_[i].shape),
              str("SafetensorsWriter::commit: '", entries_[i].name, "' not written (", written_[i],
                  " of ", numelOf(entries_[i].shape), " elements)"));
    if (!crcs_[i].empty()) continue;
    // Read back from the page cache in small pieces: the checksum of what
    // the file holds, with no copy of the tensor held.
    buffer.resize(kReadBackBytes);
    const std::uint64_t bytes = numelOf(entries_[i].shape) * sizeof(float);
    uLong crc = crc32_z(0, nullptr, 0);
    for (std::uint64_t done = 0; done < bytes;) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), bytes - done));
      const ssize_t n = ::pread(fd_, buffer.data(), want, static_cast<off_t>(offsets_[i] + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("read back", n < 0 ? errno : EIO);
      crc =
          crc32_z(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<std::size_t>(n));
      done += static_cast<std::uint64_t>(n);
      heartbeat();
    }
    crcs_[i] = hex(static_cast<std::uint32_t>(crc));
  }
  buffer = {};
  const std::string text = header(crcs_);
  DDP_CHECK(8 + text.size() == (offsets_.empty() ? fileSize_ : offsets_.front()),
            "SafetensorsWriter::commit: the header changed size");
  unsigned char lengthBytes[8];
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] = static_cast<unsigned char>(std::uint64_t{text.size()} >> (8 * i));
  if (!writeAllAt(fd_, lengthBytes, 8, 0) || !writeAllAt(fd_, text.data(), text.size(), 8))
    fail("write", errno);
  if (::fsync(fd_) != 0) fail("fsync", errno);
  ::close(std::exchange(fd_, -1));
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    throw DataError(
        str(path_, ": cannot rename the temporary file into place (", std::strerror(errno), ")"));
  }
  committed_ = true;
  fsyncDirectoryOf(path_);
}

void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, tensor] : tensors)
    entries.push_back({name, tensor->shape()});
  SafetensorsWriter writer(path, std::move(entries), metadata);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor host = tensors[i].second->onHost();  // a view, or a device tensor's copy
    writer.write(i, host.span(), SafetensorsWriter::Checksum::kNow);
  }
  writer.commit();
}

void checkCanSave(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    throw DataError(str(path, ": cannot create (it is a directory)"));
  }
  const std::string temporary = temporaryPathFor(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw DataError(str(path, ": cannot create (", std::strerror(errno), ")"));
  ::close(fd);
  ::unlink(temporary.c_str());
}

std::string readWholeFile(const std::string& path) {
  // A directory opens as a stream whose size reads as -1; a FIFO's open
  // waits for a writer (`--init-from` a FIFO hung), a device reads as empty
  // or never ends, and a pipe (`<(...)`) has no size to read by.
  if (struct stat info{}; ::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode)) throw DataError(str(path, ": is a directory, not a file"));
    const char* kind = S_ISFIFO(info.st_mode)   ? "a pipe or FIFO"
                       : S_ISCHR(info.st_mode)  ? "a character device"
                       : S_ISBLK(info.st_mode)  ? "a block device"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                                                : "of another kind";
    throw DataError(str(path, ": not a regular file (", kind,
                        "): weights and checkpoints are read from files; save it to one first"));
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(str(path, ": cannot open (", std::strerror(errno), ")"));
  const std::streamoff size = in.tellg();
  if (size < 0) throw DataError(str(path, ": cannot tell its size (not a regular file?)"));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  for (std::size_t done = 0; done < bytes.size(); done += kHeartbeatBytes) {
    const std::size_t chunk = std::min(kHeartbeatBytes, bytes.size() - done);
    if (!in.read(bytes.data() + done, static_cast<std::streamsize>(chunk))) {
      throw DataError(str(path, ": cannot read (", std::strerror(errno), ")"));
    }
    heartbeat();
  }
  return bytes;
}

namespace {

// What a file that is not safetensors is, when it is what PyTorch users most
// often hand over instead: torch.save's (a zip archive, or before PyTorch
// 1.6 a bare pickle, protocol 2); "" otherwise. Asked only of a file that
// safetensors' rules have already refused: its first 8 bytes are no header
// length (torch.save's read as gigabytes), or what they delimit is no JSON
// (a zip archive with no flags set reads as 64 MiB).
std::string torchSaveFormat(std::span<const char> bytes) {
  const std::string_view start(bytes.data(), std::min<std::size_t>(bytes.size(), 4));
  const bool zip = start == std::string_view("PK\x03\x04", 4);
  const bool pickle = start.size() >= 2 && start[0] == '\x80' && start[1] >= 2 && start[1] <= 5;
  if (!zip && !pickle) return "";
  return str("not a safetensors file but a Python pickle", zip ? " in a zip archive" : "",
             ", as torch.save writes (.pt, .pth); in PyTorch, "
             "safetensors.torch.save_file(model.state_dict(), FILE) writes one");
}

// The file's `bytes`, kept alive by `owner`; `mapping` is theirs when mapped.
SafetensorsFile parseBytes(std::span<char> bytes, const std::shared_ptr<void>& owner,
                           const MappedFile* mapping, const std::string& path) {
  const std::uint64_t fileSize = bytes.size();
  if (fileSize < 8) {
    throw DataError(str(path, ": not a safetensors file (shorter than its 8-byte header length)"));
  }
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  if (length > kMaxHeaderBytes || length > fileSize - 8) {
    if (const std::string other = torchSaveFormat(bytes); !other.empty())
      throw DataError(str(path, ": ", other));
    // A header that starts as one ('{') was cut short; anything else is
    // some other file's first bytes read as a length.
    if (fileSize > 8 && bytes[8] == '{' && length <= kMaxHeaderBytes) {
      throw DataError(str(path, ": truncated: its safetensors header alone is ", length,
                          " bytes, and the file has ", fileSize,
                          " bytes (copied or written only in part?)"));
    }
    throw DataError(str(path, ": not a safetensors file (its first 8 bytes, read as the header's ",
                        "length, say ", length, " bytes; the file has ", fileSize, " bytes)"));
  }
  json header;
  try {
    header = json::parse(bytes.data() + 8, bytes.data() + 8 + length);
  } catch (const json::exception& e) {
    if (const std::string other = torchSaveFormat(bytes); !other.empty())
      throw DataError(str(path, ": ", other));
    throw DataError(str(path, ": safetensors header is not valid JSON (", e.what(), ")"));
  }
  if (!header.is_object()) throw DataError(str(path, ": safetensors header is not a JSON object"));

  const std::uint64_t dataSize = fileSize - 8 - length;
  SafetensorsFile file;
  if (header.contains("__metadata__")) {
    const json& metadata = header["__metadata__"];
    if (!metadata.is_object()) throw DataError(str(path, ": __metadata__ is not a JSON object"));
    for (const auto& [key, value] : metadata.items()) {
      if (value.is_string()) file.metadata[key] = value.get<std::string>();
    }
  }
  file.checksummed = std::any_of(file.metadata.begin(), file.metadata.end(),
                                 [](const auto& entry) { return isChecksumKey(entry.first); });
  if (file.checksummed) {
    expectCrc(path, file, std::string(kMetadataCrcKey), "its metadata", metadataCrc(file.metadata));
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dtype = entry.at("dtype").get<std::string>();
      const std::size_t elementBytes = floatBytes(dtype);
      if (elementBytes == 0) {
        throw DataError(str(path, ": tensor '", name, "' has dtype ", dtype,
                            "; only float tensors are read (F32, F16, BF16, F64)"));
      }
      const Shape shape = entry.at("shape").get<Shape>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > dataSize) {
        throw DataError(str(path, ": tensor '", name, "' data_offsets lie outside the file's ",
                            dataSize, " data bytes (truncated file?)"));
      }
      const std::uint64_t size = offsets[1] - offsets[0];
      if (size != numelOf(shape) * elementBytes) {
        throw DataError(str(path, ": tensor '", name, "' shape ", shapeString(shape),
                            " does not match its ", size, " data bytes"));
      }
      ranges.emplace_back(offsets[0], offsets[1]);
      char* data = bytes.data() + 8 + length + offsets[0];
      if (file.checksummed) {
        expectCrc(path, file, str(kTensorCrcPrefix, name), str("tensor '", name, "'"),
                  crcOf(data, size));
      }
      // F32: a view into the file's bytes (no copy, no zero-filled
      // allocation), unless another writer left them unaligned for floats.
      Tensor tensor;
      if (dtype != "F32") {
        tensor = toFloat32(dtype, data, shape, str(path, ": tensor '", name, "'"));
        ++file.converted[dtype];
      } else if (reinterpret_cast<std::uintptr_t>(data) % alignof(float) == 0) {
        tensor = Tensor::view(reinterpret_cast<float*>(data), shape, owner);
      } else {
        tensor = Tensor(shape);
        std::memcpy(tensor.data(), data, size);
      }
      file.tensors.emplace(name, std::move(tensor));
      // Checked (and converted or copied): until a caller reads it, a
      // view's data need not be resident (Note [Reading files through a
      // mapping]).
      if (mapping != nullptr) mapping->release(data, size);
    } catch (const json::exception& e) {
      throw DataError(str(path, ": malformed entry for tensor '", name, "' (", e.what(), ")"));
    }
  }
  if (file.checksummed) {
    for (const auto& [key, value] : file.metadata) {
      if (key.starts_with(kTensorCrcPrefix) &&
          !file.tensors.contains(key.substr(kTensorCrcPrefix.size()))) {
        throw DataError(str(path, ": the file is damaged: it has a checksum for tensor '",
                            key.substr(kTensorCrcPrefix.size()), "' but no such tensor"));
      }
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second)
      throw DataError(str(path, ": tensors' data overlap"));
  }
  return file;
}

}  // namespace

SafetensorsFile loadSafetensors(const std::string& path) {
  std::shared_ptr<const MappedFile> mapping = MappedFile::map(path);
  if (mapping == nullptr) {
    return parseSafetensors(std::make_shared<std::string>(readWholeFile(path)), path);
  }
  // The views' owner is the mapping; const only in that nothing here writes.
  SafetensorsFile file = parseBytes(mapping->bytes(), std::const_pointer_cast<MappedFile>(mapping),
                                    mapping.get(), path);
  file.mapping = std::move(mapping);
  return file;
}

SafetensorsFile parseSafetensors(std::shared_ptr<std::string> buffer, const std::string& path) {
  return parseBytes(std::span<char>(buffer->data(), buffer->size()), buffer, nullptr, path);
}

void SafetensorsFile::release(std::span<const float> values) const {
  if (mapping != nullptr && mapping->contains(values.data(), values.size_bytes()))
    mapping->release(values.data(), values.size_bytes());
}

void SafetensorsFile::copyInto(const std::string& name, Tensor& target) const {
  const Tensor& source = tensors.at(name);
  target.copyFrom(source);
  release(source.span());
}

namespace {

// Entry `key` of `metadata`, read by `parse` (std::stoull, std::stod), which
// must take all of it.
template <typename Parse>
auto parseEntry(const std::string& path, const std::map<std::string, std::string>& metadata,
                const std::string& key, Parse parse) {
  const auto entry = metadata.find(key);
  if (entry == metadata.end())
    throw DataError(str(path, ": metadata entry '", key, "' is missing"));
  const std::string& text = entry->second;
  try {
    std::size_t used = 0;
    const auto value = parse(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw DataError(str(path, ": metadata entry '", key, "' is malformed: '", text, "'"));
}

}  // namespace

std::size_t metadataCount(const std::string& path,
                          const std::map<std::string, std::string>& metadata,
                          const std::string& key) {
  return static_cast<std::size_t>(
      parseEntry(path, metadata, key, [](const std::string& s, std::size_t* used) {
        // std::stoull takes a sign, and wraps a negative count round.
        if (s.empty() || s[0] < '0' || s[0] > '9') throw std::invalid_argument(s);
        return std::stoull(s, used);
      }));
}

double metadataReal(const std::string& path, const std::map<std::string, std::string>& metadata,
                    const std::string& key) {
  return parseEntry(path, metadata, key,
                    [](const std::string& s, std::size_t* used) { return std::stod(s, used); });
}

void saveModel(const std::string& path, Sequential& model,
               const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (Parameter* p : model.parameters())
    tensors.emplace_back(p->name, &p->value);
  saveModelTensors(path, tensors, metadata);
}

void saveModelTensors(const std::string& path,
                      const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> all = metadata;
  all["format"] = "pt";  // what safetensors.torch expects
  all["producer"] = "ddp";
  saveSafetensors(path, tensors, all);
}

namespace {

// The file's layers as the model line writes them ("Linear(784, 32) ->
// Linear(32, 10)"), from its 2-D "<layer>.weight" tensors ([out, in], as
// PyTorch stores them) in layer order, so that a file of another shape says
// which; empty when it holds none.
std::string describeFileLayers(const SafetensorsFile& file, const std::string& otherPrefix) {
  std::vector<std::pair<std::string, std::string>> layers;  // (order key, description)
  for (const auto& [name, tensor] : file.tensors) {
    constexpr std::string_view kWeight = ".weight";
    if ((!otherPrefix.empty() && name.starts_with(otherPrefix)) || !name.ends_with(kWeight) ||
        tensor.shape().size() != 2)
      continue;
    // "layers.10" after "layers.2": the index as a fixed-width number.
    std::string key = name.substr(0, name.size() - kWeight.size());
    const std::size_t dot = key.find_last_of('.');
    const std::string index = dot == std::string::npos ? std::string() : key.substr(dot + 1);
    if (!index.empty() && index.size() < 12 &&
        std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
      key = key.substr(0, dot + 1) + std::string(12 - index.size(), '0') + index;
    layers.emplace_back(key, str("Linear(", tensor.shape()[1], ", ", tensor.shape()[0], ")"));
  }
  std::sort(layers.begin(), layers.end());
  std::string text;
  for (const auto& [key, layer] : layers)
    text += str(text.empty() ? "" : " -> ", layer);
  return text;
}

}  // namespace

void checkHoldsModel(const std::string& path, const SafetensorsFile& file, Sequential& model,
                     const std::string& otherPrefix) {
  // The model's layers beside the file's, so that another --hidden
  // shows as such, not only as one tensor's shape.
  const auto shapes = [&] {
    const std::string layers = describeFileLayers(file, otherPrefix);
    return str(" (the file holds ", layers.empty() ? std::string("no 2-D weights") : layers,
               "; the model is ", model.describe(), ")");
  };
  std::map<std::string, const Shape*> allowed;  // name -> the shape it must have
  for (Parameter* p : model.parameters()) {
    if (!file.tensors.contains(p->name))
      throw DataError(str(path, ": has no tensor '", p->name, "'", shapes()));
    allowed.emplace(p->name, &p->value.shape());
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!otherPrefix.empty() && name.starts_with(otherPrefix)) continue;
    const auto it = allowed.find(name);
    if (it == allowed.end())
      throw DataError(
          str(path, ": has tensor '", name, "' that the model does not have", shapes()));
    if (tensor.shape() != *it->second) {
      throw DataError(str(path, ": tensor '", name, "' has shape ", shapeString(tensor.shape()),
                          " but the model's is ", shapeString(*it->second), shapes()));
    }
  }
}

void loadModel(const std::string& path, Sequential& model) {
  SafetensorsFile file = loadSafetensors(path);
  checkHoldsModel(path, file, model);
  // Everything checked: now copy, so a bad file never leaves a half-loaded model.
  for (Parameter* p : model.parameters())
    file.copyInto(p->name, p->value);
}

}  // namespace ddp::trainer
