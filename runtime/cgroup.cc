#include "runtime/cgroup.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>

namespace ddp {
namespace {

bool isDirectory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// Whether the comma-separated `list` ("cpu,cpuacct") holds `name`.
bool listHolds(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// `base` + `path` and the directories above it up to `base`, those that
// exist, appended to `out`.
void appendWalk(const std::string& base, std::string path, CgroupVersion version,
                std::vector<CgroupDir>& out) {
  for (;;) {
    const std::string dir = base + (path == "/" ? "" : path) + "/";
    if (isDirectory(dir)) out.push_back({dir, version});
    if (path == "/" || path.empty()) return;
    const std::size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

}  // namespace

std::vector<CgroupDir> cgroupDirs(const std::string& root, std::string_view v1Controller) {
  std::ifstream cgroups(root + "/proc/self/cgroup");
  std::vector<CgroupDir> dirs;
  std::string line;
  while (std::getline(cgroups, line)) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      appendWalk(root + "/sys/fs/cgroup", path, CgroupVersion::kV2, dirs);
    } else if (listHolds(controllers, v1Controller)) {
      const std::string joined = root + "/sys/fs/cgroup/" + controllers;
      appendWalk(
          isDirectory(joined) ? joined : root + "/sys/fs/cgroup/" + std::string(v1Controller), path,
          CgroupVersion::kV1, dirs);
    }
  }
  return dirs;
}

std::optional<unsigned long long> keyedNumber(const std::string& path, std::string_view key) {
  std::ifstream file(path);
  std::string word;
  while (file >> word) {
    unsigned long long value = 0;
    if (word == key && file >> value) return value;
    file.ignore(1 << 12, '\n');
  }
  return std::nullopt;
}

std::optional<unsigned long long> cgroupNumber(const std::string& path, int word) {
  std::ifstream file(path);
  std::string text;
  for (int i = 0; i <= word; ++i)
    if (!(file >> text)) return std::nullopt;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  try {
    std::size_t used = 0;
    const unsigned long long value = std::stoull(text, &used);
    return used == text.size() ? std::optional(value) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ddp
