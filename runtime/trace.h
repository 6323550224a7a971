// Timeline of one rank in the Chrome trace format (chrome://tracing, Perfetto).
//
// Spans are complete events ("ph": "X") on numbered lanes (tid): the training
// thread on lane 0, the communication thread on lane 1, so a bucket's
// all-reduce drawn under the backward of the layers it overlaps shows the
// overlap directly. Timestamps are steady_clock microseconds, which all
// processes of one node share, so per-rank files merge into one timeline
// (benchmarks/merge_traces.py). Not thread-safe: the training thread records.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ddp {

class Trace {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  enum Lane { kCompute = 0, kComm = 1 };

  explicit Trace(int rank) : rank_(rank) {}
  void span(std::string name, const char* category, Lane lane, TimePoint begin, TimePoint end);
  bool empty() const { return spans_.empty(); }
  // Writes {"traceEvents": [...]} with this rank as the process. Throws DataError.
  void write(const std::string& path) const;

 private:
  struct Span {
    std::string name;
    const char* category;
    Lane lane;
    TimePoint begin;
    TimePoint end;
  };
  int rank_;
  std::vector<Span> spans_;
};

}  // namespace ddp
