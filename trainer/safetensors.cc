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

// Writes all of `data`; false, with errno set, if it cannot.
bool writeAll(int fd, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, std::min(size, kHeartbeatBytes));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
    heartbeat();
  }
  return true;
}

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

void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  for (const auto& entry : metadata)
    DDP_CHECK(!isChecksumKey(entry.first), str("saveSafetensors: reserved key ", entry.first));
  std::vector<Tensor> host;  // views of host tensors, copies of device ones
  host.reserve(tensors.size());
  for (const auto& entry : tensors)
    host.push_back(entry.second->onHost());
  std::map<std::string, std::string> meta = metadata;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    meta[str(kTensorCrcPrefix, tensors[i].first)] =
        hex(crcOf(host[i].data(), host[i].numel() * sizeof(float)));
  }
  meta[std::string(kMetadataCrcKey)] = hex(metadataCrc(meta));
  json header = json::object();
  header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::uint64_t bytes = tensor->numel() * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", tensor->shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data is 8-byte aligned
  const std::uint64_t length = text.size();
  unsigned char lengthBytes[8];
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] = static_cast<unsigned char>(length >> (8 * i));

  const std::string temporary = temporaryPathFor(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw DataError(str(path, ": cannot create (", std::strerror(errno), ")"));
  const std::uint64_t fileSize = 8 + length + offset;
  const std::optional<std::uint64_t> freeBefore = freeBytesOf(fd);
  bool written = writeAll(fd, lengthBytes, 8) && writeAll(fd, text.data(), text.size());
  for (std::size_t i = 0; written && i < host.size(); ++i)
    written = writeAll(fd, host[i].data(), host[i].numel() * sizeof(float));
  const char* failed = !written ? "write" : ::fsync(fd) != 0 ? "fsync" : nullptr;
  if (failed != nullptr) {
    const int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    throw writeError(temporary, failed, error, fileSize, freeBefore);
  }
  ::close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    throw DataError(
        str(path, ": cannot rename the temporary file into place (", std::strerror(error), ")"));
  }
  fsyncDirectoryOf(path);
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
  // A directory opens as a stream whose size reads as -1.
  if (std::filesystem::is_directory(path))
    throw DataError(str(path, ": is a directory, not a file"));
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
    throw DataError(
        str(path, ": bad safetensors header length ", length, " (file has ", fileSize, " bytes)"));
  }
  json header;
  try {
    header = json::parse(bytes.data() + 8, bytes.data() + 8 + length);
  } catch (const json::exception& e) {
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

void saveModel(const std::string& path, Sequential& model) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (Parameter* p : model.parameters())
    tensors.emplace_back(p->name, &p->value);
  saveSafetensors(path, tensors, {{"format", "pt"}, {"producer", "ddp"}});
}

void checkHoldsModel(const std::string& path, const SafetensorsFile& file, Sequential& model,
                     const std::string& otherPrefix) {
  std::map<std::string, const Shape*> allowed;  // name -> the shape it must have
  for (Parameter* p : model.parameters()) {
    if (!file.tensors.contains(p->name)) {
      throw DataError(
          str(path, ": has no tensor '", p->name, "' (the model is ", model.describe(), ")"));
    }
    allowed.emplace(p->name, &p->value.shape());
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!otherPrefix.empty() && name.starts_with(otherPrefix)) continue;
    const auto it = allowed.find(name);
    if (it == allowed.end()) {
      throw DataError(str(path, ": has tensor '", name, "' that the model (", model.describe(),
                          ") does not have"));
    }
    if (tensor.shape() != *it->second) {
      throw DataError(str(path, ": tensor '", name, "' has shape ", shapeString(tensor.shape()),
                          " but the model's is ", shapeString(*it->second)));
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
