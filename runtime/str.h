// Small string helpers used everywhere: concatenation and fixed-precision numbers.
// (g++ 12 has no <format>; these keep call sites short without it.)
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ddp {

// `text` as a whole number when it is one and nothing else ("12"), else
// nullopt ("", "-1", "12abc", " 12", a value past T's range, null). For
// numbers launchers put in the environment: atoi would read "12abc" as 12
// and junk as rank 0.
template <class T = long>
std::optional<T> naturalNumber(const char* text) {
  if (text == nullptr || *text < '0' || *text > '9') return std::nullopt;
  const char* end = text + std::strlen(text);
  T value = 0;
  const auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// Concatenates anything that can be streamed: str("rank ", 3, " of ", 4).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// `value` with `digits` digits after the point: fixed(3.14159, 2) == "3.14".
// Every digit, also of a value longer than the buffer holds (1e300, say).
// A NaN is "nan" whatever its sign bit (printf writes "-nan" for some, as
// 0 * inf gives: a sign that means nothing); infinities "inf" and "-inf".
inline std::string fixed(double value, int digits) {
  if (std::isnan(value)) return "nan";
  char buffer[64];
  const int length = std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  if (length < 0 || static_cast<std::size_t>(length) < sizeof buffer) return buffer;
  std::string text(static_cast<std::size_t>(length), '\0');
  std::snprintf(text.data(), text.size() + 1, "%.*f", digits, value);
  return text;
}

// `value` to `digits` significant digits, as printf's %g: significant(0.04972, 3)
// == "0.0497", significant(0.1, 3) == "0.1".
// fixed(value, digits) below a million in magnitude, above it as printf's
// %e with `digits` digits after the point: a loss that diverged reads
// "5.4130e+24", not as 25 digits and 4 more.
inline std::string fixedOrExponent(double value, int digits) {
  if (!(std::fabs(value) >= 1e6) || std::isinf(value)) return fixed(value, digits);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*e", digits, value);
  return buffer;
}

// NaN and infinities as fixed() writes them.
inline std::string significant(double value, int digits) {
  if (std::isnan(value)) return "nan";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  return buffer;
}

// Enough significant digits for any double to read back bit for bit
// (std::stod(significant(x, kExactDigits)) == x), for numbers kept in files.
constexpr int kExactDigits = 17;

// A byte count for people: "512 bytes", "7.1 MiB", "1.5 GiB".
inline std::string bytesString(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? str(static_cast<long long>(bytes), " bytes")
                   : fixed(bytes, 1) + " " + units[unit];
}

// Joins items with a separator: join({1, 2}, ",") == "1,2".
template <class Range>
std::string join(const Range& items, const std::string& separator) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

}  // namespace ddp
