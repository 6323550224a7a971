#include "runtime/trace.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "runtime/error.h"

namespace ddp {
namespace {

double micros(Trace::TimePoint t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

void Trace::span(std::string name, const char* category, Lane lane, TimePoint begin,
                 TimePoint end) {
  spans_.push_back(Span{std::move(name), category, lane, begin, end});
}

void Trace::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw DataError(str("--trace: cannot write '", path, "' (", std::strerror(errno), ")"));
  out << "{\"traceEvents\":[\n";
  out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank_
      << ",\"args\":{\"name\":\"rank " << rank_ << "\"}},\n";
  out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank_
      << ",\"tid\":0,\"args\":{\"name\":\"compute\"}},\n";
  out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank_
      << ",\"tid\":1,\"args\":{\"name\":\"comm\"}}";
  out.setf(std::ios::fixed);
  out.precision(3);
  for (const Span& s : spans_) {
    out << ",\n{\"ph\":\"X\",\"pid\":" << rank_ << ",\"tid\":" << s.lane << ",\"name\":\""
        << escaped(s.name) << "\",\"cat\":\"" << s.category << "\",\"ts\":" << micros(s.begin)
        << ",\"dur\":" << micros(s.end) - micros(s.begin) << "}";
  }
  out << "\n]}\n";
  if (!out) throw DataError(str("--trace: writing '", path, "' failed"));
}

}  // namespace ddp
