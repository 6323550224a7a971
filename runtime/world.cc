#include "runtime/world.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mpi_check.h"
#include "runtime/str.h"

namespace ddp {
namespace {

Launcher detectLauncher() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) return Launcher::kMpirun;
  if (std::getenv("SLURM_STEP_ID") != nullptr && std::getenv("SLURM_PROCID") != nullptr) {
    return Launcher::kSrun;
  }
  return Launcher::kSingleton;
}

}  // namespace

const char* launcherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSrun:
      return "srun";
    case Launcher::kSingleton:
      return "singleton";
  }
  return "unknown";
}

int rankFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    if (const auto rank = naturalNumber<int>(std::getenv(name))) return *rank;
  }
  return 0;
}

int localRankFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const auto rank = naturalNumber<int>(std::getenv(name))) return *rank;
  }
  return 0;
}

std::string thisHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::vector<std::string> hostOfEachRank(const World& world) {
  std::vector<std::string> hosts(static_cast<std::size_t>(world.size()));
  for (const NodeLayout& node : world.nodes()) {
    for (int rank : node.ranks)
      hosts[static_cast<std::size_t>(rank)] = node.host;
  }
  return hosts;
}

std::string describeNodes(const std::vector<NodeLayout>& nodes) {
  std::ostringstream text;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const std::vector<int>& ranks = nodes[n].ranks;
    text << (n > 0 ? "; " : "") << nodes[n].host << (ranks.size() == 1 ? ": rank " : ": ranks ");
    for (std::size_t i = 0; i < ranks.size();) {
      std::size_t j = i;  // ranks[i..j] are consecutive
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
        ++j;
      text << (i > 0 ? "," : "") << ranks[i];
      if (j > i) text << "-" << ranks[j];
      i = j + 1;
    }
  }
  return text.str();
}

World::World() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw CommError(
          "MPI_Init_thread failed: is this binary started by mpirun or srun --mpi=pmix?");
    }
    ownsMpi_ = true;
    if (provided < MPI_THREAD_MULTIPLE) {
      throw CommError("MPI_Init_thread: this MPI library does not provide MPI_THREAD_MULTIPLE");
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  DDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  DDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  log::setRank(rank_);

  MPI_Comm local = MPI_COMM_NULL;
  DDP_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  DDP_MPI_CHECK(MPI_Comm_rank(local, &localRank_));
  DDP_MPI_CHECK(MPI_Comm_size(local, &localSize_));

  // Node leaders (local rank 0) number themselves in global-rank order; each
  // node learns its index from its leader.
  MPI_Comm leaders = MPI_COMM_NULL;
  DDP_MPI_CHECK(
      MPI_Comm_split(MPI_COMM_WORLD, localRank_ == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders));
  if (leaders != MPI_COMM_NULL) {
    DDP_MPI_CHECK(MPI_Comm_rank(leaders, &nodeIndex_));
    DDP_MPI_CHECK(MPI_Comm_size(leaders, &nodeCount_));
    MPI_Comm_free(&leaders);
  }
  int layout[2] = {nodeIndex_, nodeCount_};
  DDP_MPI_CHECK(MPI_Bcast(layout, 2, MPI_INT, 0, local));
  nodeIndex_ = layout[0];
  nodeCount_ = layout[1];
  MPI_Comm_free(&local);

  hostname_ = thisHostname();
  launcher_ = detectLauncher();

  // Every rank's (node index, host name), so every rank can describe the layout.
  constexpr int kHostBytes = 256;
  std::vector<char> mine(kHostBytes + sizeof(int), '\0');
  std::memcpy(mine.data(), &nodeIndex_, sizeof(int));
  hostname_.copy(mine.data() + sizeof(int), kHostBytes - 1);
  std::vector<char> all(mine.size() * static_cast<std::size_t>(size_));
  DDP_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                              static_cast<int>(mine.size()), MPI_CHAR, MPI_COMM_WORLD));
  nodes_.resize(static_cast<std::size_t>(nodeCount_));
  for (int r = 0; r < size_; ++r) {
    const char* entry = all.data() + static_cast<std::size_t>(r) * mine.size();
    int index = 0;
    std::memcpy(&index, entry, sizeof(int));
    NodeLayout& node = nodes_.at(static_cast<std::size_t>(index));
    if (node.ranks.empty()) node.host = std::string(entry + sizeof(int));
    node.ranks.push_back(r);
  }
}

World::~World() {
  if (!ownsMpi_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void World::abort(int code) const {
  // What this rank said about why goes out first, unless nobody reads it
  // (Note [Output that is not read]).
  log::flush(log::kAbortStallLimit);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest.
}

}  // namespace ddp
