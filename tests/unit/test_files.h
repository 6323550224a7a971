// Helpers that write small input files for tests into a private temp dir.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ddp::testing {

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddp-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A fake file system root for readers of /proc and /sys that take one
// (availableBytes, cpuQuota): files written under it, parents created.
class FakeRoot {
 public:
  void write(const std::string& path, const std::string& text) {
    const std::filesystem::path file = std::filesystem::path(dir_.path()) / path;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  std::string path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// The big-endian IDX header for unsigned bytes with these dimensions.
inline std::vector<std::uint8_t> idxHeader(const std::vector<std::uint32_t>& dims) {
  std::vector<std::uint8_t> bytes = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  return bytes;
}

inline void writeGz(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(file);
}

inline void writePlain(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// This process's VmRSS or VmHWM ("VmRSS:"), in bytes; 0 if absent.
inline std::size_t statusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(key)) return std::stoull(line.substr(key.size())) * 1024;
  }
  return 0;
}

// Resets the peak resident set (VmHWM) to the resident set now, through
// /proc/self/clear_refs; false where the kernel does not allow it.
inline bool resetResidentPeak() {
  return static_cast<bool>((std::ofstream("/proc/self/clear_refs") << "5").flush());
}

inline std::vector<std::uint8_t> concat(std::vector<std::uint8_t> a,
                                        const std::vector<std::uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace ddp::testing
