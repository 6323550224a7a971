// The command lines of the benchmark tools, as every tool here answers
// them: -h or --help anywhere prints the usage and what the tool does on
// stdout (exit 0); a command line the tool cannot run is named on stderr,
// the usage after it (exit 2), before anything is measured. No MPI here:
// the tools without MPI share it too.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp::bench {

// "8", "64K", "4M", "1G" (powers of two) in bytes; nothing for any other
// text (a unit of its own, a negative size, trailing characters).
inline std::optional<std::size_t> parseSize(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || !(value >= 0.0)) return std::nullopt;
  switch (*end) {
    case 'K':
    case 'k':
      value *= 1 << 10, ++end;
      break;
    case 'M':
    case 'm':
      value *= 1 << 20, ++end;
      break;
    case 'G':
    case 'g':
      value *= 1 << 30, ++end;
      break;
    default:
      break;
  }
  if (*end != '\0' || value > 0x1p52) return std::nullopt;
  return static_cast<std::size_t>(value);
}

// A whole number of at least `least`, or nothing.
inline std::optional<int> parseCount(const char* text, int least) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < least || value > 1000000000) return std::nullopt;
  return static_cast<int>(value);
}

// A number above 0 and at most `most` (a time, a size in MiB), or nothing.
inline std::optional<double> parsePositive(const char* text, double most) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0.0) || value > most) return std::nullopt;
  return value;
}

// A command line the benchmark cannot run: main prints the message, then
// the usage line, and exits 2.
class BadCommandLine : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// What a tool says about itself.
struct ToolText {
  const char* name;   // "checkpoint_bench"
  const char* usage;  // "usage: checkpoint_bench [DIR]\n": one or more lines
  const char* about;  // what it does, its arguments and its output, for --help
};

// Runs `body` with the tool's arguments (argv[1..]) unless one is -h or
// --help (then prints the usage and `about`, and returns 0); a
// BadCommandLine from `body` is printed with the usage, and 2 returned.
// `body` reads its whole command line before it measures anything, so
// that a mistake costs nothing.
inline int runTool(const ToolText& text, int argc, char** argv,
                   const std::function<int(const std::vector<std::string>&)>& body) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      std::printf("%s\n%s", text.usage, text.about);
      return 0;
    }
  }
  try {
    return body(args);
  } catch (const BadCommandLine& e) {
    std::fprintf(stderr, "%s: %s\n%s", text.name, e.what(), text.usage);
    return 2;
  }
}

// The positional arguments of a tool that takes at most `most`, none an
// option; throws BadCommandLine otherwise.
inline void checkPositional(const std::vector<std::string>& args, std::size_t most) {
  for (const std::string& arg : args) {
    if (arg.size() > 1 && arg[0] == '-') throw BadCommandLine("unknown option " + arg);
  }
  if (args.size() > most) {
    throw BadCommandLine("too many arguments (" + std::to_string(args.size()) + "; at most " +
                         std::to_string(most) + ")");
  }
}

// `text` as a whole number of at least `least`, or BadCommandLine naming
// it as `what` (an option, an argument's name).
inline int wholeNumber(const std::string& text, int least, const std::string& what) {
  const std::optional<int> count = parseCount(text.c_str(), least);
  if (!count) {
    throw BadCommandLine(what + " " + text + ": not a whole number of at least " +
                         std::to_string(least));
  }
  return *count;
}

// Positional argument `index` as wholeNumber() reads it, or `fallback`
// when there are fewer.
inline int countArgument(const std::vector<std::string>& args, std::size_t index, int least,
                         int fallback, const char* what) {
  return index < args.size() ? wholeNumber(args[index], least, what) : fallback;
}

// Positional argument `index` when given, else `fallback`: a directory,
// or BadCommandLine.
inline std::string directoryArgument(const std::vector<std::string>& args, std::size_t index,
                                     const std::string& fallback) {
  const std::string dir = index < args.size() ? args[index] : fallback;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) throw BadCommandLine(dir + ": not a directory");
  return dir;
}

}  // namespace ddp::bench
