// How the plain path cuts a reduce-scatter into MPI calls (Note [Plain
// reduce-scatter in stripes], comm/mpi/mpi_communicator.cc): every rank's
// part is cut into the same number of stripes, and call j reduces stripe j
// of every part.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

namespace ddp::comm {

class Stripes {
 public:
  // `parts`: the reduce-scatter's bounds, one more than its ranks, the first
  // 0, not decreasing; viewed, not copied, so they must outlive this.
  // `piece`: the most elements one call should carry (more than 0). There
  // are as many stripes as pieces of `piece` elements the whole needs, and
  // at least one, so a call carries at most `piece` elements plus one for
  // each rank, and each stripe of a part holds its share of the part,
  // rounded down at both ends.
  Stripes(std::span<const std::size_t> parts, std::size_t piece)
      : parts_(parts), count_(std::max<std::size_t>(1, (parts.back() + piece - 1) / piece)) {}

  std::size_t count() const { return count_; }
  // The first element of stripe j of part q, for j up to count() (where it is
  // the part's end): stripe j is [begin(q, j), begin(q, j + 1)).
  std::size_t begin(std::size_t q, std::size_t j) const {
    return parts_[q] + (parts_[q + 1] - parts_[q]) * j / count_;
  }
  std::size_t length(std::size_t q, std::size_t j) const { return begin(q, j + 1) - begin(q, j); }

 private:
  std::span<const std::size_t> parts_;
  std::size_t count_;
};

}  // namespace ddp::comm
